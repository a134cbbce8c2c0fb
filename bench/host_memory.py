"""Memory state that both tools of a side-by-side bench must start from alike.

This VM's virtio-balloon reports freed pages to the host (free page reporting): the guest's next
touch of such a page costs a host fault, so a run that allocates page-cache pages right after
another run freed them is faster or slower for reasons that have nothing to do with the tool
(bench/README.md, "memory effect"). Warming free memory before every timed run removes the bias.

fio does not ask for huge pages for its buffers, while dlio-fast's buffer pools do (bufpool.c). On
this VM that is worth a lot: the virtio disk splits an O_DIRECT 1 MiB read from 4 KiB pages into two
requests (max_segments 254), and copies out of the page cache run faster into huge pages. So a fair
bar is fio at its best: THP switched to `always` for its run (thp_always) with --iomem_align=2m.
"""

import contextlib
import mmap

THP = "/sys/kernel/mm/transparent_hugepage/enabled"


def warm_free_memory(nbytes):
    """Touch then free ``nbytes`` of anonymous memory, so that the pages the next run allocates are
    backed by the host again (recently freed pages are reused first and reported only after a delay)."""
    avail = next(int(l.split()[1]) * 1024 for l in open("/proc/meminfo") if l.startswith("MemAvailable:"))
    n = min(int(nbytes), avail // 2) // mmap.PAGESIZE * mmap.PAGESIZE
    if n <= 0:
        return
    m = mmap.mmap(-1, n)
    view = memoryview(m)
    view[:: mmap.PAGESIZE] = b"\1" * (n // mmap.PAGESIZE)
    view.release()
    m.close()


@contextlib.contextmanager
def thp_always():
    """THP mode `always` for the duration, restored after; yields False (and changes nothing) when
    the mode cannot be switched (not root)."""
    try:
        with open(THP) as f:
            before = f.read().split("[")[1].split("]")[0]
        with open(THP, "w") as f:
            f.write("always")
    except OSError:
        yield False
        return
    try:
        yield True
    finally:
        with open(THP, "w") as f:
            f.write(before)
