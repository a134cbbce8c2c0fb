"""Memory state that both tools of a side-by-side bench must start from alike.

This VM's virtio-balloon reports freed pages to the host (free page reporting): the guest's next
touch of such a page costs a host fault, so a run that allocates page-cache pages right after
another run freed them is faster or slower for reasons that have nothing to do with the tool
(bench/README.md, "memory effect"). Warming free memory before every timed run removes the bias.
"""

import mmap


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
