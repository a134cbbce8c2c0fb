"""The storage layer: the one place that chooses where bytes go (files or an object store).

``backend_for(cfg)`` (a workload's storage.storage_type) and ``backend_for_uri(path)`` (a path given on
the command line: ``s3://`` or a filesystem path) return a ``Backend`` (dlio.storage.base); the jobs
call it and never test which one they hold. A backend is a module plus one line in ``BACKENDS``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional, Tuple

from dlio.base.errors import ConfigError
from dlio.storage.base import Backend
from dlio.storage.files import FileBackend

if TYPE_CHECKING:  # the loader (YAML, numpy) only where a config is loaded: not for `io` or --version
    from dlio.config import Config

TIMEOUT_KEY = "dlio_fast.storage_timeout"


def _s3(options: Optional[Mapping[str, Any]], endpoint: Optional[str], timeout: Tuple[Optional[float], str]) -> Backend:
    """The S3 backend, imported when a run asks for it: its client's modules are 30 ms of every start."""
    from dlio.storage.s3.backend import S3Backend

    return S3Backend(options, endpoint, *timeout)


# storage.storage_type -> its backend, made from the config's storage_options or a command line's --endpoint,
# and the deadline of its requests (seconds, and the key or option that sets it; files have none)
BACKENDS: Dict[str, Callable[..., Backend]] = {
    "local_fs": lambda options, endpoint, timeout: FileBackend(),
    "s3": _s3,
}


# storage.storage_type words the config accepts (DLIO's) that no backend emulates -> why, and what to use
# instead: the one place such a word is refused (a unit test checks that BACKENDS and NOT_EMULATED together
# are the config's STORAGE_TYPES)
NOT_EMULATED: Dict[str, str] = {
    "aistore": "use s3 through the store's S3 API, as AIStore offers, or local_fs with a mounted folder",
}
# URI scheme -> storage.storage_type (a path with no scheme is local_fs)
SCHEMES: Dict[str, str] = {"s3://": "s3"}


def make(
    kind: str,
    options: Optional[Mapping[str, Any]] = None,
    endpoint: Optional[str] = None,
    timeout: Tuple[Optional[float], str] = (None, TIMEOUT_KEY),
) -> Backend:
    """The one choice of a backend: by its storage type."""
    maker = BACKENDS.get(kind)
    if maker is None:
        why = NOT_EMULATED.get(kind, f"one of {', '.join(BACKENDS)}")
        raise ConfigError(f"storage.storage_type = {kind!r}: not emulated ({why})", "storage.storage_type", kind)
    return maker(options, endpoint, timeout)


def backend_for(cfg: Config) -> Backend:
    """The backend of a workload config (storage.storage_type, storage.storage_options,
    dlio_fast.storage_timeout)."""
    return make(
        cfg.storage.storage_type, cfg.storage.storage_options, None, (cfg.dlio_fast.storage_timeout, TIMEOUT_KEY)
    )


def kind_of(path: str) -> str:
    """The storage type a command-line path names: its URI scheme's, else local_fs."""
    return next((kind for scheme, kind in SCHEMES.items() if path.startswith(scheme)), "local_fs")


def backend_for_uri(path: str, endpoint: Optional[str] = None, timeout_s: Optional[float] = None) -> Backend:
    """The backend of a path given on the command line (``--endpoint``: an object store's; ``--timeout``)."""
    return make(kind_of(path), None, endpoint, (timeout_s, "--timeout"))
