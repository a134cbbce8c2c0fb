"""The host and the process: host facts, device counters, MPI glue, child processes, output folders,
memory checks, on the C bindings and dlio.base."""
