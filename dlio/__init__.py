"""dlio-fast: deep-learning training I/O emulation and filesystem microbenchmarks with a C core."""

import os

__version__ = "0.1.0"

# numpy's OpenBLAS starts a helper thread per core when it loads, and they spin. dlio-fast does no linear
# algebra: in a JPEG generation on 2 cores those threads held 5 % of the samples (perf), taken from the
# writers (0.1-0.2 CPU s of a 1 s command). One thread, unless the user chose a number; a user's own job
# (profile) is started with the environment the user gave (user_env).
OPENBLAS_THREADS = "OPENBLAS_NUM_THREADS"
_OURS = OPENBLAS_THREADS not in os.environ
if _OURS:
    os.environ[OPENBLAS_THREADS] = "1"


def user_env() -> "dict[str, str]":
    """This process's environment without what dlio-fast set for itself."""
    env = dict(os.environ)
    if _OURS and env.get(OPENBLAS_THREADS) == "1":
        del env[OPENBLAS_THREADS]
    return env
