"""Remake the golden files: DLIO itself (2.0.0 and current) generates a tiny dataset of every format.

    .venv/bin/python tests/data/dlio-golden/make_golden.py [--format F ...] [2.0.0|current ...]

Uses the DLIO installs tests/dlio_installs.py finds (tools/install-dlio.sh makes them); the workload is
tests/interop_dlio.py's workload() with generate_data=True, train=False.
"""

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from dlio_installs import dlio_python  # noqa: E402
from interop_dlio import FORMATS, run_dlio, workload  # noqa: E402

SUBFOLDERS = "npz-subfolders"  # npz with num_subfolders_train/eval = 2: train/{i % 2}/img_i_of_2.npz
CASES = FORMATS + (SUBFOLDERS,)


def make(version: str, formats) -> None:
    python = dlio_python(version)
    if python is None:
        sys.exit(f"DLIO {version} not installed (tools/install-dlio.sh installs it)")
    root = HERE / version
    for f in formats:
        shutil.rmtree(root / f, ignore_errors=True)
    with tempfile.TemporaryDirectory() as work:
        jobs = [
            workload(
                version,
                f.split("-")[0],
                root / f,
                Path(work) / f / "out",
                True,
                False,
                subfolders=2 if f == SUBFOLDERS else 0,
            )
            for f in formats
        ]
        for fmt, r in zip(formats, run_dlio(python, jobs, Path(work))):
            print(f"DLIO {version} {fmt}: {'ok' if r['ok'] else 'FAILED ' + r['error']}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--format", action="append", choices=CASES, help="only these formats (default: all)")
    ap.add_argument("versions", nargs="*", default=["2.0.0", "current"])
    a = ap.parse_args()
    for v in a.versions:
        make(v, a.format or list(CASES))
