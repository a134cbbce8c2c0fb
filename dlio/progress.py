"""Live progress on stderr: one line redrawn in place, only on a terminal, only on rank 0."""
import sys
import time


class Progress:
    def __init__(self, enabled=None, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.t0 = None
        self.key = None
        self.shown = False

    def _draw(self, text):
        if self.enabled:
            self.stream.write("\r\x1b[2K" + text)
            self.stream.flush()
            self.shown = True

    def done(self):
        if self.enabled and self.shown:
            self.stream.write("\n")
            self.stream.flush()
            self.shown = False

    def generation(self, nbytes, nfiles, total_bytes, total_files):
        if self.key != "gen":
            self.key, self.t0 = "gen", time.monotonic()
        dt = max(1e-6, time.monotonic() - self.t0)
        pct = 100.0 * nbytes / total_bytes if total_bytes else 100.0
        self._draw(f"generating {nfiles}/{total_files} files  {pct:5.1f} %  {nbytes / 2**20 / dt:8.1f} MiB/s")

    def training(self, split, epoch, run, plan):
        """on_tick of a training run: steps, samples/s, MiB/s and the AU so far."""
        key = (split, epoch)
        if self.key != key:
            self.key, self.t0 = key, time.monotonic()
        ops, nbytes, steps = run.progress()
        dt = max(1e-6, time.monotonic() - self.t0)
        n = len(plan.steps)
        batch = int(plan.steps["nsamples"][0]) if n else 0
        compute = float(plan.steps["compute_ns"][:steps].sum()) / 1e9 if steps else 0.0
        au = 100.0 * compute / dt
        width = 24
        fill = int(width * steps / n) if n else width
        bar = "#" * fill + "." * (width - fill)
        self._draw(f"epoch {epoch} {split:<5} [{bar}] {steps}/{n} steps  {steps * batch / dt:10.1f} samples/s  "
                   f"{nbytes / 2**20 / dt:9.1f} MiB/s  AU {au:5.1f} %")

    def io_point(self, point, budget):
        """on_tick for one `io` point: MiB/s and IOPS so far, and how much of the budget is spent."""
        t0 = time.monotonic()

        def tick(run):
            ops, nbytes, _ = run.progress()
            dt = max(1e-6, time.monotonic() - t0)
            if budget.size:
                pct = 100.0 * nbytes / budget.size
            elif budget.runtime_ns:
                pct = 100.0 * dt * 1e9 / (budget.runtime_ns + budget.ramp_ns)
            else:
                pct = 0.0
            self._draw(f"{point.rw} bs {point.bs} {point.engine} qd {point.qd} x{point.threads}: "
                       f"{min(pct, 100.0):5.1f} %  {nbytes / 2**20 / dt:9.1f} MiB/s  {ops / dt:10.0f} IOPS")
        return tick
