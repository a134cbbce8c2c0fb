"""Engine names, declared once for the Python layer.

The C registry (`_core.engines()`) defines what an engine is and whether it runs here; this module
holds the words people type for it. A unit test checks that FILE_ENGINES and the registry agree.
The config adds one word of its own: `odirect`, posix with O_DIRECT (what DLIO's reader.odirect asks
for), so that a run's engine choice is one key. On S3 the engine is the object store's client,
S3_ENGINE, whatever the file engine would have been (dlio.storage.s3 refuses a file engine set explicitly).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping, Optional, Tuple

from dlio.base.errors import ConfigError

# Engines that read and write files from dlio-fast's own threads (runs, io points, checkpoints).
FILE_ENGINES: Tuple[str, ...] = ("posix", "io_uring", "mmap", "null")
# MPI-IO: one call at a time per rank, only under mpiexec (`io --engine mpiio`).
MPIIO = "mpiio"
IO_ENGINES: Tuple[str, ...] = FILE_ENGINES + (MPIIO,)
# The object store's client (storage.storage_type s3, s3:// paths): the engine word of every S3 figure.
S3_ENGINE = "s3dlio"
# What dlio_fast.engine (and `run --engine`) accepts.
ODIRECT = "odirect"
CONFIG_ENGINES: Tuple[str, ...] = ("posix", ODIRECT, "io_uring", "mmap", "null", S3_ENGINE)
# Other spellings people type, and what they mean.
ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "uring": "io_uring",
        "io-uring": "io_uring",
        "iouring": "io_uring",
        "o_direct": ODIRECT,
        "direct": ODIRECT,
        "psync": "posix",
    }
)


def resolve(word: str, direct: Optional[bool] = None, checkpoint: bool = False) -> Tuple[str, bool]:
    """(C engine, O_DIRECT) for an engine word. `odirect` is posix with O_DIRECT; `direct` overrides
    the O_DIRECT choice when given. Checkpoint files go through posix where the engine is mmap, which
    cannot write them (and their reads mirror the writes)."""
    name = ALIASES.get(word, word)
    o_direct = name == ODIRECT
    if name == ODIRECT or (checkpoint and name == "mmap"):
        name = "posix"
    return name, o_direct if direct is None else bool(direct)


# cfg is a dlio.config.Config; not imported even for type checking: load -> schema -> keys.dlio_fast -> here
# would be a file cycle (tests/unit/test_layers.py counts every import).
def engine_spec(cfg: Any, checkpoint: bool = False) -> Tuple[str, bool]:
    """(C engine, O_DIRECT) of a resolved config: dlio_fast.engine, and for the dataset's readers
    DLIO's reader.odirect too (`checkpoint`: for checkpoint files, which that key does not cover)."""
    direct = True if (not checkpoint and cfg.reader.odirect) else None
    return resolve(cfg.dlio_fast.engine, direct, checkpoint)


def is_async(engine: str) -> bool:
    """True when the C engine keeps several requests in flight per thread (queue depth > 1 means
    something); a synchronous engine runs one at a time whatever the queue depth."""
    from dlio import _core  # the registry, loaded when asked (the schema imports this module)

    return any(name == engine and caps & _core.CAP_ASYNC for name, caps, *_ in _core.engines())


def check_qd(engine: str, qd: int, where: str = "dlio_fast.qd") -> None:
    """A queue depth above 1 on a synchronous engine is refused, never silently run at 1."""
    if qd > 1 and not is_async(engine):
        raise ConfigError(
            f"{where} = {qd} with engine {engine}: {engine} runs one request at a time per "
            "thread, so a queue depth above 1 would run at 1; use --engine io_uring for "
            "requests in flight, or --qd 1 (more reader threads give parallelism too)",
            where,
            qd,
        )
