"""Dataset file formats: one module per format, each answering two questions.

  program(prog, dims, nsamples, spec, seed, final)
      describe the file `final` (after its companion files, such as TFRecord's `.idx`) as segments
      of a dlio.dataset.formats.program.Program, which the C core writes (each file through a
      temporary name, renamed when complete); returns False when it cannot (hdf5 with chunks or
      compression). A format may also have programs(prog, dims_array, nsamples, spec, seeds,
      finals) describing a whole batch with numpy (images).
  write(path, dims, nsamples, spec, seed, final=None, index=0) -> int
      (formats or layouts without programs: synthetic, chunked hdf5) write one complete file at
      `path` (a temporary name; `final` is the name it will be renamed to; `index` is the file's
      global index, which only `synthetic` writes) and return the bytes written.
  extents(path, nsamples, spec) -> (sample_idx, offsets, lengths)   (layout_extents(dims, nsamples, spec): the
      same from the shape alone, without reading the file, where the format knows it)
      the byte ranges a real reader of that format touches for each sample (numpy arrays, sorted
      by sample; several ranges per sample when a sample spans several datasets/chunks). A format
      with GROUPED = True (parquet) gives groups instead: ranges keyed by the first sample of the
      group they belong to, read once per reader and epoch (dlio.train.planner).

and a few helpers the dataset layer uses:

  EXT          file extension (the dataset layer always uses the format's name, as DLIO does)
  WHOLE_FILE   True when the real reader reads the whole file for every sample
  expected_size(dims, nsamples, spec) -> int | None      exact size when it is known in advance
  estimate_sizes(dims_array, nsamples, spec) -> ndarray  size estimate per file (vectorised)
  companions(final, spec) -> list[str]                   other files that belong to the file
  valid(path, dims, nsamples, spec) -> bool               cheap "is this a complete file" check

`dims` is one file's drawn shape: (d1, d2) for DLIO's default square records, or the
`record_dims` tuple. Content always comes from the C core (stamped random content of programs,
or its deterministic fill).
"""

import importlib
import os
from types import ModuleType
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Protocol, Tuple

import numpy as np
from numpy.typing import NDArray

from dlio.dataset.ranges import Arrays
from dlio.dataset.section import FORMATS, DatasetSpec, check_format

if TYPE_CHECKING:
    from dlio.dataset.formats.program import Program

_MODULES = {
    "npz": "npz",
    "npy": "npy",
    "hdf5": "hdf5",
    "tfrecord": "tfrecord",
    "jpeg": "image",
    "png": "image",
    "csv": "csv",
    "indexed_binary": "indexed_binary",
    "mmap_indexed_binary": "indexed_binary",
    "synthetic": "synthetic",
    "parquet": "parquet",
}

Dims = Tuple[int, ...]  # one file's drawn shape
Extents = Arrays  # (sample or group key, offset, length) of every range a reader reads


class ProgramFn(Protocol):
    def __call__(
        self, prog: "Program", dims: Dims, nsamples: int, spec: DatasetSpec, seed: int, final: str
    ) -> Optional[bool]: ...


class ProgramsFn(Protocol):
    def __call__(
        self,
        prog: "Program",
        dims: NDArray[np.int64],
        nsamples: int,
        spec: DatasetSpec,
        seeds: NDArray[np.uint64],
        finals: List[str],
    ) -> None: ...


class WriteFn(Protocol):
    def __call__(
        self,
        path: str,
        dims: Dims,
        nsamples: int,
        spec: DatasetSpec,
        seed: int,
        final: Optional[str] = None,
        index: int = 0,
    ) -> int: ...


class LayoutFn(Protocol):
    def __call__(self, dims: Dims, nsamples: int, spec: DatasetSpec) -> Optional[Extents]: ...


class ExpectedSizeFn(Protocol):
    def __call__(self, dims: Dims, nsamples: int, spec: DatasetSpec) -> Optional[int]: ...


class EstimateSizesFn(Protocol):
    def __call__(self, dims: NDArray[np.int64], nsamples: int, spec: DatasetSpec) -> NDArray[np.int64]: ...


class CompanionsFn(Protocol):
    def __call__(self, final: str, spec: DatasetSpec) -> List[str]: ...


class ValidFn(Protocol):
    def __call__(self, path: str, dims: Dims, nsamples: int, spec: DatasetSpec) -> bool: ...


class ExtentsFn(Protocol):
    def __call__(self, path: str, nsamples: int, spec: DatasetSpec) -> Extents: ...


class Format:
    """A format module bound to a format name (jpeg/png share a module, and so do the two
    indexed_binary flavours): its functions (the module docstring's), None for program, programs and
    layout_extents where the module has none; a format written only from programs has a write() that
    raises."""

    def __init__(self, name: str, module: ModuleType) -> None:
        self.name = name
        self.module = module
        self.EXT = name
        self.WHOLE_FILE = bool(module.WHOLE_FILE)
        self.GROUPED = bool(getattr(module, "GROUPED", False))
        self.program: Optional[ProgramFn] = getattr(module, "program", None)
        self.programs: Optional[ProgramsFn] = getattr(module, "programs", None)
        self.write: WriteFn = getattr(module, "write", None) or self._programs_only
        self.layout_extents: Optional[LayoutFn] = getattr(module, "layout_extents", None)
        self.expected_size: ExpectedSizeFn = module.expected_size
        self.estimate_sizes: EstimateSizesFn = module.estimate_sizes
        self.companions: CompanionsFn = module.companions
        self.valid: ValidFn = module.valid
        self.extents: ExtentsFn = module.extents

    def __repr__(self) -> str:
        return f"<format {self.name}>"

    def _programs_only(self, path: str, *_: object, **__: object) -> int:
        raise TypeError(f"{self!r} has no write(): its files are written from its program")


_cache: Dict[str, Format] = {}


def get_format(name: str) -> Format:
    """The format object for a DLIO format name (e.g. 'npz', 'jpeg', 'mmap_indexed_binary')."""
    key = check_format(name)
    f = _cache.get(key)
    if f is None:
        mod = importlib.import_module(f"dlio.dataset.formats.{_MODULES[key]}")
        f = _cache[key] = Format(key, mod)
    return f


# ---------------------------------------------------------------------------------------------
# helpers shared by the format modules

_M64 = (1 << 64) - 1


def mix_seed(*parts: int) -> int:
    """A 64-bit seed from integers (splitmix64 chain): distinct streams per file, chunk, record."""
    z = 0x243F6A8885A308D3
    for p in parts:
        z = (z + (int(p) & _M64) + 0x9E3779B97F4A7C15) & _M64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
        z ^= z >> 31
    return z


def mix_seeds(base: int, index: NDArray[np.integer[Any]]) -> NDArray[np.uint64]:
    """mix_seed(base, i) for every i of an integer array, vectorised (uint64)."""

    def m(v: int) -> np.uint64:
        return np.uint64(v & _M64)

    with np.errstate(over="ignore"):
        z = np.full(np.shape(index), 0x243F6A8885A308D3, np.uint64)
        for p in (np.full(np.shape(index), int(base) & _M64, np.uint64), np.asarray(index).astype(np.uint64)):
            z = z + p + m(0x9E3779B97F4A7C15)
            z = (z ^ (z >> np.uint64(30))) * m(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * m(0x94D049BB133111EB)
            z ^= z >> np.uint64(31)
    return z


def itemsize(spec: DatasetSpec) -> int:
    return np.dtype(spec.record_element_type).itemsize


def record_elems(dims: Dims) -> int:
    """Elements of a record of this shape (1 for no dimensions)."""
    n = 1
    for d in dims:
        n *= int(d)
    return n


def whole_file_extents(path: str, nsamples: int) -> Extents:
    """Every sample reads the whole file: (0, size) each."""
    size = os.stat(path).st_size
    idx = np.arange(nsamples, dtype=np.int64)
    return idx, np.zeros(nsamples, np.int64), np.full(nsamples, size, np.int64)


__all__ = ["FORMATS", "get_format", "mix_seed"]
