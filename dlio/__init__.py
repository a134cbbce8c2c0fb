"""dlio-fast: deep-learning training I/O emulation and filesystem microbenchmarks with a C core."""

__version__ = "0.1.0"
