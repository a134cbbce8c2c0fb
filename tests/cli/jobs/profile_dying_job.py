"""A small training loop for `dlio-fast profile` capture tests that ends badly on purpose: it reads
the npz files of --data in batches of --batch (np.load, sorted order), waits --compute seconds per
step, and after --steps steps ends as --end says:
  kill   SIGKILL to itself (no exit handler, no destructor runs)
  abort  abort() (SIGABRT, as a failed assertion in C does)
  segv   a read of address 0 (SIGSEGV, as a crash in an extension does)
  exit3  exit status 3
  wait   touches --ready, then keeps reading epochs until it is stopped by a signal"""

import argparse
import ctypes
import glob
import os
import signal
import sys
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--compute", type=float, default=0.01)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--end", choices=["kill", "abort", "segv", "exit3", "wait"], required=True)
    ap.add_argument("--ready", default=None)
    a = ap.parse_args()
    files = sorted(glob.glob(os.path.join(a.data, "*.npz")))
    step = 0
    while True:
        for k in range(0, len(files) - a.batch + 1, a.batch):
            for f in files[k : k + a.batch]:
                np.load(f)["x"]
            time.sleep(a.compute)
            step += 1
            if step == a.steps:
                sys.stdout.flush()
                if a.end == "kill":
                    os.kill(os.getpid(), signal.SIGKILL)
                elif a.end == "abort":
                    os.abort()
                elif a.end == "segv":
                    ctypes.string_at(0)
                elif a.end == "exit3":
                    sys.exit(3)
                elif a.ready:
                    open(a.ready, "w").close()


if __name__ == "__main__":
    main()
