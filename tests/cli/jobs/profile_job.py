"""A training job for `dlio-fast profile` tests, shaped like a PyTorch DataLoader with worker
threads: worker t reads the whole batches k = t, t+T, ... (at most --prefetch batches read ahead
of the trainer), the trainer takes the batches in order and waits --compute seconds on each.
Files are read as real loaders do: np.load for npz, h5py for hdf5, the file's bytes decoded by
PIL for jpeg. --processes uses forked worker processes instead of threads, --torch a real
torch DataLoader with worker processes.
--ranges FILE instead reads --reads random 4 KiB ranges of one file with pread."""

import argparse
import glob
import io
import os
import sys
import threading
import time

import numpy as np


def load(path):
    if path.endswith(".npz"):
        return np.load(path)["x"]
    if path.endswith((".h5", ".hdf5")):
        import h5py

        with h5py.File(path, "r") as f:
            return f["records_0"][:]
    from PIL import Image

    with open(path, "rb") as f:
        data = f.read()
    return np.asarray(Image.open(io.BytesIO(data)))


def accelerator_wait(seconds):
    """Wait like a trainer on its accelerator: off the CPU and outside the GIL, so that on a small
    machine the reader threads keep the cores (a spinning wait would take one of them)."""
    time.sleep(seconds)


def train(files, batch, epochs, threads, prefetch, compute):
    steps = len(files) // batch
    for _ in range(epochs):
        ready = [None] * steps
        done = [0]  # steps the trainer has taken
        cond = threading.Condition()
        window = max(prefetch, threads)  # steps read ahead of the trainer, at most

        def worker(t):
            for k in range(t, steps, threads):
                with cond:
                    cond.wait_for(lambda: k < done[0] + window)
                out = [load(p) for p in files[k * batch : (k + 1) * batch]]
                with cond:
                    ready[k] = out
                    cond.notify_all()

        ws = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
        for w in ws:
            w.start()
        for k in range(steps):
            with cond:
                cond.wait_for(lambda: ready[k] is not None)
                ready[k] = 0
                done[0] = k + 1
                cond.notify_all()
            accelerator_wait(compute)
        for w in ws:
            w.join()


def _process_worker(w, workers, steps, batch, files, go, done):
    for k in range(w, steps, workers):
        go.acquire()  # the trainer let batch k in
        [load(p) for p in files[k * batch : (k + 1) * batch]]
        done.put(k)


def train_processes(files, batch, epochs, workers, prefetch, compute):
    """The job with worker processes (forked, as a DataLoader's are) instead of threads: the
    trainer lets batch k + window in when it takes batch k, as the threaded job does."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    steps = len(files) // batch
    window = max(prefetch, workers)
    for _ in range(epochs):
        go = [ctx.Semaphore(0) for _ in range(workers)]
        done = ctx.Queue()
        ps = [
            ctx.Process(target=_process_worker, args=(w, workers, steps, batch, files, go[w], done))
            for w in range(workers)
        ]
        for p in ps:
            p.start()
        for k in range(min(window, steps)):
            go[k % workers].release()
        ready = set()
        for k in range(steps):
            while k not in ready:
                ready.add(done.get())
            if k + window < steps:
                go[(k + window) % workers].release()
            accelerator_wait(compute)
        for p in ps:
            p.join()


def train_torch(files, batch, epochs, workers, compute):
    """The same job on a real torch.utils.data.DataLoader with worker processes (default
    prefetch_factor 2, new workers each epoch, as persistent_workers=False does)."""
    import torch.utils.data as tud

    class Files(tud.Dataset):
        def __len__(self):
            return len(files)

        def __getitem__(self, i):
            return load(files[i])

    loader = tud.DataLoader(Files(), batch_size=batch, shuffle=False, num_workers=workers, drop_last=True)
    for _ in range(epochs):
        for _batch in loader:
            accelerator_wait(compute)


def ranges(path, reads, seed=1):
    size = os.path.getsize(path)
    offs = np.random.default_rng(seed).integers(0, size // 4096, reads) * 4096
    fd = os.open(path, os.O_RDONLY)
    for o in offs.tolist():
        os.pread(fd, 4096, o)
        accelerator_wait(0.0002)
    os.close(fd)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--data")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--compute", type=float, default=0.02)
    ap.add_argument("--ranges")
    ap.add_argument("--reads", type=int, default=2000)
    ap.add_argument("--torch", action="store_true", help="read through a torch DataLoader with --threads workers")
    ap.add_argument("--processes", action="store_true", help="--threads worker processes instead of threads")
    a = ap.parse_args()
    # A real trainer waits on its accelerator outside the GIL, and DataLoader workers are processes:
    # without this, the trainer's step here would also hold a wait of up to 5 ms (the default
    # switch interval) for the GIL of a reader thread that is parsing a file.
    sys.setswitchinterval(0.0005)
    if a.ranges:
        ranges(a.ranges, a.reads)
    else:
        files = sorted(glob.glob(os.path.join(a.data, "**", "*.*"), recursive=True))
        if a.torch:
            train_torch(files, a.batch, a.epochs, a.threads, a.compute)
        elif a.processes:
            train_processes(files, a.batch, a.epochs, a.threads, a.prefetch, a.compute)
        else:
            train(files, a.batch, a.epochs, a.threads, a.prefetch, a.compute)
