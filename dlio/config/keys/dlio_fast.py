"""dlio-fast's own keys: its ``dlio_fast`` section (DLIO ignores unknown top-level sections) and its
additions to DLIO's sections (asynchronous checkpoints)."""

from __future__ import annotations

from typing import Tuple

from dlio.config import engines
from dlio.config.keys.row import Key

# The two DLIO versions whose configs, data and result files dlio-fast interchanges with.
DIALECTS = ("2.0.0", "current")

KEYS: Tuple[Key, ...] = (
    Key(
        "dlio_fast.engine",
        "enum",
        "posix",
        "I/O engine",
        choices=engines.CONFIG_ENGINES,
        env="DLIO_FAST_ENGINE",
        io=True,
        aliases=engines.ALIASES,
    ),
    Key("dlio_fast.qd", "int", 1, "queue depth per reader thread", lo=1, hi=1024, env="DLIO_FAST_QD", io=True),
    Key(
        "dlio_fast.cache",
        "enum",
        "keep",
        "page cache: keep; drop each file's pages before every epoch (no root needed, checked with mincore); "
        "drop-all: the whole host's page cache, once per node, root only",
        choices=("keep", "drop", "drop-all"),
        env="DLIO_FAST_CACHE",
        io=True,
    ),
    Key(
        "dlio_fast.compute_mode",
        "enum",
        "spin",
        "emulated compute: busy-spin, or sleep then spin the end",
        choices=("spin", "hybrid"),
    ),
    Key(
        "dlio_fast.compat_dlio_order",
        "bool",
        False,
        "true: DLIO's index-loader order (contiguous, ascending, unshuffled per rank); false: honour the shuffles",
        io=True,
    ),
    Key(
        "dlio_fast.file_order",
        "enum",
        "name",
        "the file list before shuffling: name = DLIO's (sorted by file name, so round-robin subfolders "
        "interleave); path = sorted by full path (one subfolder after another, as a job that sorts its "
        "paths reads them)",
        choices=("name", "path"),
        io=True,
    ),
    Key(
        "dlio_fast.skip_bad_files",
        "bool",
        False,
        "leave out files that are missing, unreadable or changed since generation (counted), instead of stopping",
    ),
    Key("dlio_fast.plots", "bool", False, "write PNG plots into the output folder after the run"),
    Key(
        "dlio_fast.trace",
        "bool",
        False,
        "write a DFTracer trace per rank (trace-{rank}-of-{size}.pfw.gz: JSON lines; opens in Perfetto)",
    ),
    Key(
        "dlio_fast.seed",
        "int",
        10,
        "seed of the generated files' content (shapes use DLIO's fixed seed 10, so DLIO and dlio-fast agree on sizes)",
        lo=0,
        hi=2**32 - 1,
    ),
    Key(
        "dlio_fast.mlperf_rules",
        "enum",
        "enforce",
        "a workload CLOSED under MLPerf Storage (dlio.mlperf.rules): enforce refuses a dataset smaller than its "
        "Rules 3.1.2 minimum, warn prints it, off skips it",
        choices=("enforce", "warn", "off"),
    ),
    Key(
        "dlio_fast.results_dir",
        "str",
        None,
        "MLPerf Storage results tree: without --output the run goes to RESULTS_DIR/training|checkpointing/MODEL/"
        "run/TIMESTAMP, with a provenance.json (code commit, resolved config and its SHA-256, host)",
        nullable=True,
    ),
    Key(
        "dlio_fast.dialect",
        "enum",
        "auto",
        "which DLIO the run interchanges with: 2.0.0 (PyPI; MLPerf Storage v1) or current (main); auto: 2.0.0 when "
        "the config spells a key the 2.0.0 way (dataset.record_length, checkpoint.num_layers, `model: NAME`), else "
        "current. Decides the data layout written (HDF5 dataset names, CSV header) and the throughput formula",
        choices=DIALECTS + ("auto",),
    ),
    Key(
        "dlio_fast.null_delay_ns",
        "int",
        0,
        "busy-wait per request of the null engine: a storage of known latency (tests, dlio-fast maxacc)",
        lo=0,
    ),
    Key(
        "dlio_fast.storage_timeout",
        "num",
        60.0,
        "seconds an object store may go without answering (S3: each request's deadline, and a worker with no "
        "reply for this long is stopped); the run then ends with what it measured",
        lo=1,
        hi=86400,
    ),
    Key(
        "dlio_fast.create_bucket",
        "bool",
        False,
        "S3: create the bucket when it does not exist (generate, and run when it generates)",
    ),
)

# asynchronous checkpoints (PyTorch DCP's async_save), in DLIO's checkpoint section
CHECKPOINT_KEYS: Tuple[Key, ...] = (
    Key(
        "checkpoint.async_save",
        "bool",
        False,
        "checkpoints during training as PyTorch DCP's async_save: the step blocks for a copy of the rank's state "
        "into host memory, a writer thread saves it while training goes on (one save in flight)",
        io=True,
    ),
    Key(
        "checkpoint.async_host_buffer_bytes",
        "int",
        0,
        "async_save's host buffer: 0 holds the rank's whole state, capped at half the available memory; a smaller "
        "buffer is a staging buffer the state is copied through in chunks (said in the record)",
        lo=0,
        hi=2**50,
    ),
)
