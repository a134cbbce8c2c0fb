"""A training job for `dlio-fast profile` tests and the README, in the loader shapes people run
(--shape), each reading the files of --data as real loaders do (np.load for npz, h5py for hdf5,
the file's bytes decoded by PIL for jpeg) and waiting --compute seconds per step of --batch
samples, for --epochs epochs:

  threads    (default) PyTorch's batch-per-worker shape on threads: worker t reads the whole
             batches k = t, t+T, ... at most max(--prefetch, T) batches ahead of the trainer
  processes  the same with forked worker processes (as a DataLoader's are)
  torch      a real torch.utils.data.DataLoader, --threads worker processes, prefetch_factor
             --prefetch (new workers each epoch, as persistent_workers=False does)
  pool       tf.data's parallel map: a pool of --threads threads loads samples in order, at
             most (--prefetch + 1) x batch of them ahead of the trainer (one batch is spread
             over the pool's threads)
  queue      sample-parallel reader threads: each takes the next sample index from a queue and
             puts the sample into a bounded queue of --prefetch x batch samples; the trainer
             takes batch samples from it, in the order they arrive
  sync       a loop without reader threads: the trainer reads its batch, then computes

--order: sorted (the files' sorted paths, every epoch), shuffle (a new permutation each epoch)
or shuffle-once (one permutation for every epoch). --write N first writes N npz files of
--write-size bytes into --data (a job that makes its dataset before it trains). --truth FILE
writes the trainer's own measure of its steps (TrainerClock).
--ranges FILE instead reads --reads random 4 KiB ranges of one file with pread."""

import argparse
import glob
import io
import json
import os
import queue
import sys
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

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


def waited():
    """Seconds this thread has been runnable but waiting for a CPU (another process had it): the
    kernel's schedstat, read once through a descriptor kept open (0 without it)."""
    global _SCHEDSTAT
    try:
        if _SCHEDSTAT is None:
            _SCHEDSTAT = os.open(f"/proc/self/task/{threading.get_native_id()}/schedstat", os.O_RDONLY)
        return int(os.pread(_SCHEDSTAT, 128, 0).split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


_SCHEDSTAT = None
SPIN = False  # --spin: the compute is the CPU's (a GPU-less job), not an accelerator's wait


def accelerator_wait(seconds):
    """Wait like a trainer on its accelerator: off the CPU and outside the GIL, so that on a small
    machine the reader threads keep the cores (a spinning wait would take one of them). With
    --spin, compute on the CPU instead until this thread has run `seconds` (a GPU-less job), in
    numpy calls that release the GIL as a framework's kernels do. Either way the measure is the
    wall time less the time the thread waited for a CPU: what the compute takes on an idle host."""
    t, w = time.perf_counter(), waited()
    if SPIN:
        c0, a = time.thread_time(), np.ones(1 << 14)
        while time.thread_time() - c0 < seconds:
            np.sqrt(a, out=a)
    else:
        time.sleep(seconds)
    CLOCK.compute.append(time.perf_counter() - t - (waited() - w))


class TrainerClock:
    """The trainer's own measure of its steps (--truth), each less the time it waited for a CPU
    (schedstat: a busy host's other processes took it), as they would last on an idle host.
    compute: each accelerator wait (or spin). steps: from a batch in hand to the next one
    (took(); with readers: the wait, plus the hand-over of the next batch, e.g. a DataLoader's
    trainer unpickling it, plus any wait for data), or to the next batch's first read (loading();
    a loop without readers). The compute is what the trainer spends at least per step, the steps
    what it spent at most."""

    def __init__(self):
        self.compute, self.steps, self.t_took = [], [], None

    def _step(self):
        now, w = time.perf_counter(), waited()
        if self.t_took is not None:
            self.steps.append(now - self.t_took[0] - (w - self.t_took[1]))
        return now, w

    def took(self, first_of_epoch=False):
        now, w = self._step() if not first_of_epoch else (time.perf_counter(), waited())
        self.t_took = (now, w)

    def loading(self):
        if self.t_took is not None:
            self._step()
            self.t_took = None

    def end_epoch(self):
        self.t_took = None


CLOCK = TrainerClock()


def epoch_orders(files, epochs, order, seed=7):
    """The file list of each epoch."""
    if order == "sorted":
        return [list(files)] * epochs
    rng = np.random.default_rng(seed)
    once = [files[i] for i in rng.permutation(len(files))]
    if order == "shuffle-once":
        return [once] * epochs
    return [once] + [[files[i] for i in rng.permutation(len(files))] for _ in range(epochs - 1)]


def train_threads(orders, batch, threads, prefetch, compute):
    for files in orders:
        steps = len(files) // batch
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
            CLOCK.took(k == 0)
            accelerator_wait(compute)
        CLOCK.end_epoch()
        for w in ws:
            w.join()


def _process_worker(w, workers, steps, batch, files, go, done):
    for k in range(w, steps, workers):
        go.acquire()  # the trainer let batch k in
        [load(p) for p in files[k * batch : (k + 1) * batch]]
        done.put(k)


def train_processes(orders, batch, workers, prefetch, compute):
    """The job with worker processes (forked, as a DataLoader's are) instead of threads: the
    trainer lets batch k + window in when it takes batch k, as the threaded job does."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    window = max(prefetch, workers)
    for files in orders:
        steps = len(files) // batch
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
            CLOCK.took(k == 0)
            accelerator_wait(compute)
        CLOCK.end_epoch()
        for p in ps:
            p.join()


def train_torch(orders, batch, workers, prefetch, compute):
    """A real torch.utils.data.DataLoader with worker processes, one per epoch (the epoch's
    order given as its sampler)."""
    import torch.utils.data as tud

    class Files(tud.Dataset):
        def __init__(self, files):
            self.files = files

        def __len__(self):
            return len(self.files)

        def __getitem__(self, i):
            return load(self.files[i])

    for files in orders:
        loader = tud.DataLoader(
            Files(files),
            batch_size=batch,
            shuffle=False,
            num_workers=workers,
            prefetch_factor=prefetch,
            drop_last=True,
        )
        for k, _batch in enumerate(loader):
            CLOCK.took(k == 0)
            accelerator_wait(compute)
        CLOCK.end_epoch()


def train_pool(orders, batch, threads, prefetch, compute):
    """tf.data's dataset.map(load, num_parallel_calls=T).batch(b).prefetch(p): samples load on a
    pool in order, (p + 1) x b of them at most ahead of the trainer."""
    ahead = (prefetch + 1) * batch
    with ThreadPoolExecutor(threads) as pool:
        for files in orders:
            steps = len(files) // batch
            todo = iter(files[: steps * batch])
            pending = deque(pool.submit(load, p) for _, p in zip(range(ahead), todo))
            for k in range(steps):
                for _ in range(batch):
                    pending.popleft().result()
                    nxt = next(todo, None)
                    if nxt is not None:
                        pending.append(pool.submit(load, nxt))
                CLOCK.took(k == 0)
                accelerator_wait(compute)
            CLOCK.end_epoch()


def train_queue(orders, batch, threads, prefetch, compute):
    """Reader threads take sample indices from one queue and put samples into a bounded queue of
    prefetch x batch; the trainer takes batch samples from it as they arrive."""
    for files in orders:
        steps = len(files) // batch
        todo = queue.Queue()
        for p in files[: steps * batch]:
            todo.put(p)
        out = queue.Queue(maxsize=max(1, prefetch) * batch)

        def reader():
            while True:
                try:
                    p = todo.get_nowait()
                except queue.Empty:
                    return
                out.put(load(p))

        ws = [threading.Thread(target=reader) for _ in range(threads)]
        for w in ws:
            w.start()
        for k in range(steps):
            for _ in range(batch):
                out.get()
            CLOCK.took(k == 0)
            accelerator_wait(compute)
        CLOCK.end_epoch()
        for w in ws:
            w.join()


def train_sync(orders, batch, compute):
    for files in orders:
        for k in range(len(files) // batch):
            CLOCK.loading()
            [load(p) for p in files[k * batch : (k + 1) * batch]]
            CLOCK.took(True)
            accelerator_wait(compute)
        CLOCK.end_epoch()


def write_dataset(folder, n, size):
    """n npz files of one uint8 array 'x' of about size bytes, as a synthetic-data job makes them."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(3)
    side = int(np.sqrt(size))
    for i in range(n):
        np.savez(os.path.join(folder, f"sample_{i:05d}.npz"), x=rng.integers(0, 255, (side, side), dtype=np.uint8))


def ranges(path, reads, seed=1):
    size = os.path.getsize(path)
    offs = np.random.default_rng(seed).integers(0, size // 4096, reads) * 4096
    fd = os.open(path, os.O_RDONLY)
    for o in offs.tolist():
        os.pread(fd, 4096, o)
        accelerator_wait(0.0002)
    os.close(fd)


SHAPES = ("threads", "processes", "torch", "pool", "queue", "sync")

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--data")
    ap.add_argument("--shape", choices=SHAPES, default="threads")
    ap.add_argument("--order", choices=("sorted", "shuffle", "shuffle-once"), default="sorted")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--compute", type=float, default=0.02)
    ap.add_argument("--write", type=int, default=0, help="write this many npz files into --data first")
    ap.add_argument("--write-size", type=int, default=65536)
    ap.add_argument("--truth", help="write the trainer's measured time per step here (JSON)")
    ap.add_argument("--ranges")
    ap.add_argument("--reads", type=int, default=2000)
    ap.add_argument("--torch", action="store_true", help="same as --shape torch")
    ap.add_argument("--processes", action="store_true", help="same as --shape processes")
    ap.add_argument("--spin", action="store_true", help="compute on the CPU (a GPU-less job), not in a wait")
    a = ap.parse_args()
    SPIN = a.spin
    # A real trainer waits on its accelerator outside the GIL, and DataLoader workers are processes:
    # without this, the trainer's step here would also hold a wait of up to 5 ms (the default
    # switch interval) for the GIL of a reader thread that is parsing a file.
    sys.setswitchinterval(0.0005)
    if a.ranges:
        ranges(a.ranges, a.reads)
        sys.exit(0)
    if a.write:
        write_dataset(a.data, a.write, a.write_size)
    shape = "torch" if a.torch else "processes" if a.processes else a.shape
    files = sorted(glob.glob(os.path.join(a.data, "**", "*.*"), recursive=True))
    # The format's library imported up front, as a training script does: forked workers inherit it
    # instead of importing it again at each epoch's first sample.
    if files and files[0].endswith((".h5", ".hdf5")):
        import h5py  # noqa: F401
    elif files and not files[0].endswith(".npz"):
        from PIL import Image  # noqa: F401
    orders = epoch_orders(files, a.epochs, a.order)
    if shape == "threads":
        train_threads(orders, a.batch, a.threads, a.prefetch, a.compute)
    elif shape == "processes":
        train_processes(orders, a.batch, a.threads, a.prefetch, a.compute)
    elif shape == "torch":
        train_torch(orders, a.batch, a.threads, a.prefetch, a.compute)
    elif shape == "pool":
        train_pool(orders, a.batch, a.threads, a.prefetch, a.compute)
    elif shape == "queue":
        train_queue(orders, a.batch, a.threads, a.prefetch, a.compute)
    else:
        train_sync(orders, a.batch, a.compute)
    if a.truth:
        with open(a.truth, "w") as f:
            json.dump({"compute_s": CLOCK.compute, "step_s": CLOCK.steps}, f)
