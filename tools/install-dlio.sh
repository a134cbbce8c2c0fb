#!/usr/bin/env bash
# Install DLIO itself, to run interchange tests against it (never a dependency of dlio-fast):
#   DLIO 2.0.0 from PyPI into $DLIO_200_VENV (default /tmp/dlio-venv), and current DLIO from the source tree
#   or pip URL given as $1 (default: GitHub main) into $DLIO_CURRENT_VENV (default /tmp/dlio-cur-venv); $1 = none
#   installs DLIO 2.0.0 only (where GitHub cannot be reached: CI).
# The way ../shared/reference/dlio-measured.md shows: --no-deps for DLIO (its declared dependencies pull CUDA
# builds and NVIDIA DALI, several GB), then the packages it imports, CPU torch (a local wheel in /opt/wheels when
# there is one), tensorflow (2.0.0 imports it at start; both use it for tfrecord). A venv whose python already
# imports dlio_benchmark is left as it is. Prints the two python paths (tests/dlio_installs.py reads them from
# DLIO_200_PYTHON / DLIO_CURRENT_PYTHON).
set -euo pipefail
CURRENT_SRC=${1:-git+https://github.com/argonne-lcf/dlio_benchmark.git@main}
V200=${DLIO_200_VENV:-/tmp/dlio-venv}
VCUR=${DLIO_CURRENT_VENV:-/tmp/dlio-cur-venv}
PY=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1

torch_spec() {  # a local CPU wheel is far smaller and faster than the index's default (CUDA) build
  local whl
  whl=$(ls /opt/wheels/torch-*.whl 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$whl" ]; then echo "$whl"; else echo "torch --extra-index-url https://download.pytorch.org/whl/cpu"; fi
}

# DALI's tfrecord2idx (DLIO's tfrecord generator runs it): one "offset length" line per record.
write_tfrecord2idx() {
  cat > "$1/bin/tfrecord2idx" <<PYEOF
#!$1/bin/python
import struct, sys
with open(sys.argv[1], "rb") as f, open(sys.argv[2], "w") as idx:
    while True:
        start = f.tell()
        head = f.read(12)  # u64 length + u32 crc of the length
        if len(head) < 12:
            break
        (n,) = struct.unpack("<Q", head[:8])
        f.seek(n + 4, 1)   # payload + u32 crc of the payload
        idx.write(f"{start} {f.tell() - start}\n")
PYEOF
  chmod +x "$1/bin/tfrecord2idx"
}

install_one() {  # venv, what to pip install for DLIO itself, its pydftracer
  local venv=$1 dlio=$2 tracer=$3
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import dlio_benchmark" 2>/dev/null; then
    echo "== $venv already has DLIO: left as it is" >&2
  else
    echo "== installing DLIO ($dlio) into $venv" >&2
    "$PY" -m venv "$venv"
    "$venv/bin/pip" install -q --no-deps "$dlio"
    # shellcheck disable=SC2046
    "$venv/bin/pip" install -q 'numpy<2.3' h5py pandas psutil Pillow PyYAML omegaconf 'hydra-core>=1.3.2' \
      "$tracer" mpi4py mpich tensorflow $(torch_spec)  # mpich: the MPI library mpi4py's wheel loads
    write_tfrecord2idx "$venv"
  fi
}

install_one "$V200" "dlio-benchmark==2.0.0" "pydftracer==1.0.2"
echo "DLIO_200_PYTHON=$V200/bin/python"
if [ "$CURRENT_SRC" != none ]; then
  install_one "$VCUR" "$CURRENT_SRC" "pydftracer>=2.0.2"
  echo "DLIO_CURRENT_PYTHON=$VCUR/bin/python"
fi
