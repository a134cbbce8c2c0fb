"""Reading a small input file (a YAML config, a result JSON): a regular file only, with a size cap.

`--config /dev/zero` would otherwise be read until memory runs out, and a FIFO would block the
open forever; both are refused in one line naming the path.
"""

import os
import stat

from dlio.base.errors import DlioError, os_error_message

YAML_CAP = 16 << 20  # a workload file is a few KiB; 16 MiB is far past any real one
JSON_CAP = 256 << 20  # result documents with per-step records of long runs stay well below this


def read_regular(path: str, cap: int, what: str) -> bytes:
    """The bytes of `path` if it is a regular file of at most `cap` bytes, else DlioError."""
    try:
        # O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise DlioError(os_error_message(e, path, f"give a readable {what}")) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise DlioError(f"{path}: is a folder, expected a {what}")
        if not stat.S_ISREG(st.st_mode):
            raise DlioError(f"{path}: not a regular file (a device, FIFO or socket); give a {what}")
        if st.st_size > cap:
            raise DlioError(
                f"{path}: {st.st_size} bytes is more than the {cap >> 20} MiB a {what} may have; check the path"
            )
        chunks, total = [], 0
        while True:  # read to the end, not st_size: a file still being written may have grown
            b = os.read(fd, 1 << 20)
            if not b:
                break
            total += len(b)
            if total > cap:
                raise DlioError(f"{path}: more than the {cap >> 20} MiB a {what} may have; check the path")
            chunks.append(b)
        return b"".join(chunks)
    except OSError as e:
        raise DlioError(os_error_message(e, path)) from None
    finally:
        os.close(fd)
