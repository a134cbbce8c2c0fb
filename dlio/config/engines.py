"""Engine names, declared once for the Python layer.

The C registry (`_core.engines()`) defines what an engine is and whether it runs here; this module
holds the words people type for it. A unit test checks that FILE_ENGINES and the registry agree.
The config adds one word of its own: `odirect`, posix with O_DIRECT (what DLIO's reader.odirect asks
for), so that a run's engine choice is one key.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping, Optional, Tuple

# Engines that read and write files from dlio-fast's own threads (runs, io points, checkpoints).
FILE_ENGINES: Tuple[str, ...] = ("posix", "io_uring", "mmap", "null")
# MPI-IO: one call at a time per rank, only under mpiexec (`io --engine mpiio`).
MPIIO = "mpiio"
IO_ENGINES: Tuple[str, ...] = FILE_ENGINES + (MPIIO,)
# What dlio_fast.engine (and `run --engine`) accepts.
ODIRECT = "odirect"
CONFIG_ENGINES: Tuple[str, ...] = ("posix", ODIRECT, "io_uring", "mmap", "null")
# Other spellings people type, and what they mean.
ALIASES: Mapping[str, str] = MappingProxyType({
    "uring": "io_uring", "io-uring": "io_uring", "iouring": "io_uring",
    "o_direct": ODIRECT, "direct": ODIRECT, "psync": "posix",
})


def resolve(word: str, direct: Optional[bool] = None, checkpoint: bool = False) -> Tuple[str, bool]:
    """(C engine, O_DIRECT) for an engine word. `odirect` is posix with O_DIRECT; `direct` overrides
    the O_DIRECT choice when given. Checkpoint files go through posix where the engine is mmap, which
    cannot write them (and their reads mirror the writes)."""
    name = ALIASES.get(word, word)
    o_direct = name == ODIRECT
    if name == ODIRECT or (checkpoint and name == "mmap"):
        name = "posix"
    return name, o_direct if direct is None else bool(direct)


def engine_spec(cfg: Any, checkpoint: bool = False) -> Tuple[str, bool]:
    """(C engine, O_DIRECT) of a resolved config: dlio_fast.engine, and for the dataset's readers
    DLIO's reader.odirect too (`checkpoint`: for checkpoint files, which that key does not cover)."""
    direct = True if (not checkpoint and cfg.reader.odirect) else None
    return resolve(cfg.dlio_fast.engine, direct, checkpoint)
