"""The open files that S3 requests in flight need, against this host's limit (RLIMIT_NOFILE).

Every request in flight holds a connection, and every connection is a file descriptor. At 64 threads x
qd 1024 that is 65,536 of them, where a login shell's soft limit is often 1,024: s3dlio's connects then
fail with EMFILE, which reads like an endpoint that does not answer. So the parent checks before any
request: the worker raises its own soft limit up to the hard one when that suffices (the task carries
the number), else the command is refused with the limit and the fix.
"""

from __future__ import annotations

import resource

from dlio.base.errors import DlioError

# What a worker holds besides its connections: the interpreter and its modules, s3dlio's runtime
# (epoll, eventfds, a thread pool), the op-log, pipes; measured about 40 at rest, kept generous.
BASE_FILES = 256


def files_needed(inflight: int) -> int:
    """Open files a worker needs with `inflight` requests in flight."""
    return int(inflight) + BASE_FILES


def check_open_files(inflight: int, what: str, fix: str) -> int:
    """Before any request: the files a worker needs for `inflight` requests (put it in the task as
    'files'), or a one-line refusal when not even the hard limit allows them. `what` names the
    requests (e.g. '--qd 1024 x --threads 64'), `fix` the lower setting to suggest."""
    need = files_needed(inflight)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and need > hard:
        raise DlioError(
            f"{what}: {inflight} requests in flight need about {need} open files (one connection each), but "
            f"this host allows {hard} (RLIMIT_NOFILE hard limit, `ulimit -Hn`); {fix}, or raise the limit "
            f"(`ulimit -n {need}` as root, or LimitNOFILE / limits.conf)"
        )
    return need


def raise_soft_limit(need: int) -> None:
    """In the worker: the soft limit raised to `need` (up to the hard limit, which the parent checked)."""
    if not need:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
