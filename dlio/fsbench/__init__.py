"""Filesystem microbenchmarks: io points (fio-like), the grid over them, IOR-style MPI runs,
the test files they use, and the ceiling search."""
