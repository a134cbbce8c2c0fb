"""Build the one extension module, dlio._core: the C core sources plus the Cython binding.

Optional parts are found here, not guessed at run time:
  liburing  pkg-config, else the usual header paths  -> DC_HAVE_LIBURING, io_uring engine
Set DLIO_FAST_NO_URING=1 to build without io_uring even when liburing is present.
Extra compiler flags: DLIO_FAST_CFLAGS.
"""
import glob
import os
import shutil
import subprocess

from Cython.Build import cythonize
from setuptools import Extension, setup

CORE = "src/dlio_core"


def pkg_config(pkg):
    """(cflags, libs) for pkg, or None when pkg-config does not know it."""
    if not shutil.which("pkg-config"):
        return None
    try:
        cflags = subprocess.check_output(["pkg-config", "--cflags", pkg], text=True, stderr=subprocess.DEVNULL).split()
        libs = subprocess.check_output(["pkg-config", "--libs", pkg], text=True, stderr=subprocess.DEVNULL).split()
    except subprocess.CalledProcessError:
        return None
    return cflags, libs


def find_liburing():
    if os.environ.get("DLIO_FAST_NO_URING"):
        return None
    found = pkg_config("liburing")
    if found:
        return found
    for inc in ("/usr/include", "/usr/local/include"):
        if os.path.exists(os.path.join(inc, "liburing.h")):
            return [f"-I{inc}"], ["-luring"]
    return None


sources = sorted(glob.glob(f"{CORE}/*.c")) + sorted(glob.glob(f"{CORE}/engines/*.c"))
macros = [("_GNU_SOURCE", None)]
cflags = ["-std=gnu11", "-O2", "-Wall", "-Wno-unused-function"]
cflags += os.environ.get("DLIO_FAST_CFLAGS", "").split()
ldflags = ["-pthread"]

uring = find_liburing()
if uring:
    macros.append(("DC_HAVE_LIBURING", "1"))
    cflags += uring[0]
    ldflags += uring[1]
    print("dlio-fast: building with io_uring (liburing found)")
else:
    print("dlio-fast: liburing not found, io_uring engine not built (apt-get install liburing-dev)")

import numpy  # noqa: E402  (build requirement)

ext = Extension(
    "dlio._core",
    sources=["dlio/_core.pyx"] + sources,
    include_dirs=[f"{CORE}/include", numpy.get_include()],
    define_macros=macros,
    extra_compile_args=cflags,
    extra_link_args=ldflags,
)

setup(
    ext_modules=cythonize([ext], language_level=3, compiler_directives={"boundscheck": False, "wraparound": False}),
)
