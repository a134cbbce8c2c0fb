"""Build the extension modules: dlio._core (the C core sources plus the Cython binding) and, when
an MPI compiler is found, dlio._mpiio (the MPI-IO engine, linked to libmpi; the core never is).

Optional parts are found here, not guessed at run time:
  MPI       $MPICC, else $MPI_DIR/bin/mpicc, else the mpicc next to this Python (the mpich wheel
            puts it there), else mpicc on PATH; its -show/--showme flags -> dlio._mpiio
The io_uring engine needs no library (it issues the system calls itself against
<linux/io_uring.h>) and is always built on Linux; set DLIO_FAST_NO_URING=1 to leave it out, and
DLIO_FAST_NO_MPI=1 to build without the MPI-IO engine.
Extra compiler flags: DLIO_FAST_CFLAGS.
"""

import glob
import os
import shlex
import shutil
import subprocess
import sys

from Cython.Build import cythonize
from setuptools import Extension, setup

CORE = "src/dlio_core"


def mpi_compiler():
    """Path of the MPI C compiler wrapper to take flags from, or None."""
    if os.environ.get("MPICC"):
        return shutil.which(os.environ["MPICC"]) or os.environ["MPICC"]
    if os.environ.get("MPI_DIR"):
        cand = os.path.join(os.environ["MPI_DIR"], "bin", "mpicc")
        if os.access(cand, os.X_OK):
            return cand
    cand = os.path.join(os.path.dirname(sys.executable), "mpicc")
    if os.access(cand, os.X_OK):
        return cand
    return shutil.which("mpicc")


def find_mpi():
    """(include dirs, library dirs, libraries, extra link args) from the MPI compiler, or None."""
    if os.environ.get("DLIO_FAST_NO_MPI"):
        return None
    cc = mpi_compiler()
    if not cc:
        return None
    words = None
    for flag in ("-show", "--showme"):  # MPICH / Intel MPI, Open MPI
        try:
            out = subprocess.check_output([cc, flag], text=True, stderr=subprocess.DEVNULL)
        except (OSError, subprocess.CalledProcessError):
            continue
        words = shlex.split(out)[1:]  # drop the underlying compiler
        break
    if words is None:
        return None
    incs, libdirs, libs, link = [], [], [], []
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("-I"):
            incs.append(w[2:])
        elif w.startswith("-L"):
            libdirs.append(w[2:])
        elif w.startswith("-l"):
            libs.append(w[2:])
        elif w.startswith("-Wl,"):
            link.append(w)
        elif w == "-Xlinker" and i + 1 < len(words):
            link += [w, words[i + 1]]
            i += 1
        i += 1
    if not any(os.path.exists(os.path.join(d, "mpi.h")) for d in incs + ["/usr/include"]):
        return None
    if "mpi" not in libs:
        libs.append("mpi")
    # Find libmpi at run time without LD_LIBRARY_PATH (the wheel's lib/ is not on the loader path).
    link += [f"-Wl,-rpath,{d}" for d in libdirs]
    # ... and where the mpich wheel puts it when dlio-fast is installed next to it
    # (<prefix>/lib/pythonX.Y/site-packages/dlio -> <prefix>/lib), even if built elsewhere.
    link.append("-Wl,-rpath,$ORIGIN/../../..")
    # ... and an editable install's (the extension stays in the source tree): the environment it
    # is built for holds the mpich wheel's libmpi in <sys.prefix>/lib (pip's isolated build runs
    # that environment's Python, so sys.prefix is the venv, not the temporary build overlay).
    link.append(f"-Wl,-rpath,{os.path.join(sys.prefix, 'lib')}")
    return incs, libdirs, libs, link


# The core and its subsystems' folders (engines/, kvcache/, vdb/); the MPI-IO engine is its own extension.
sources = sorted(
    f
    for d in ("", "engines/", "kvcache/", "vdb/")
    for f in glob.glob(f"{CORE}/{d}*.c")
    if not f.endswith("/engines/mpiio.c")
)
macros = [("_GNU_SOURCE", None)]
cflags = ["-std=gnu11", "-O2", "-Wall", "-Wno-unused-function"]
cflags += os.environ.get("DLIO_FAST_CFLAGS", "").split()
ldflags = ["-pthread"]

if os.environ.get("DLIO_FAST_NO_URING"):
    macros.append(("DC_NO_URING", "1"))
    print("dlio-fast: DLIO_FAST_NO_URING set, io_uring engine not built")


def record_commit(path="dlio/_build_commit.txt"):
    """The git commit this build comes from, for `dlio-fast --version` (nothing outside a checkout)."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return
    if out.returncode == 0 and out.stdout.strip():
        with open(path, "w") as f:
            f.write(out.stdout.strip() + "\n")


record_commit()

import numpy  # noqa: E402  (build requirement)

ext = Extension(
    "dlio._core",
    sources=["dlio/_core.pyx"] + sources,
    include_dirs=[f"{CORE}/include", numpy.get_include()],
    define_macros=macros,
    extra_compile_args=cflags,
    extra_link_args=ldflags,
)

exts = [ext]
# dlio._interpose: the LD_PRELOAD library of `dlio-fast profile` (plain C, never imported; see
# src/dlio_profile/interpose.c). Built as an extension so that it lands in the package folder.
exts.append(
    Extension(
        "dlio._interpose",
        sources=["src/dlio_profile/interpose.c"],
        define_macros=macros,
        extra_compile_args=cflags,
        extra_link_args=["-pthread", "-ldl"],
    )
)
mpi = find_mpi()
if mpi:
    exts.append(
        Extension(
            "dlio._mpiio",
            sources=["dlio/_mpiio.pyx", f"{CORE}/engines/mpiio.c", f"{CORE}/land.c"],
            include_dirs=[f"{CORE}/include", f"{CORE}"] + mpi[0],
            library_dirs=mpi[1],
            libraries=mpi[2],
            define_macros=macros,
            extra_compile_args=cflags,
            extra_link_args=ldflags + mpi[3],
        )
    )
    print(f"dlio-fast: building the MPI-IO engine (MPI compiler {mpi_compiler()})")
else:
    print(
        "dlio-fast: no MPI compiler found, MPI-IO engine not built (pip install mpich mpi4py, "
        "or set MPICC / MPI_DIR, then reinstall)"
    )

setup(
    ext_modules=cythonize(exts, language_level=3, compiler_directives={"boundscheck": False, "wraparound": False}),
)
