"""Where an S3 endpoint is and how to sign for it: from --endpoint, DLIO's storage_options, or the
usual AWS environment variables (in that order of precedence), plus s3:// URI parsing."""

from __future__ import annotations

import dataclasses
import math
import os
import re
from typing import Mapping, Optional, Tuple

from dlio.base.errors import DlioError
from dlio.storage.s3.heap import MALLOC_REUSE

# DLIO's storage_options keys (storage/s3_storage.py) -> the AWS variable each one stands for.
STORAGE_OPTION_ENV = {
    "endpoint_url": "AWS_ENDPOINT_URL",
    "access_key_id": "AWS_ACCESS_KEY_ID",
    "secret_access_key": "AWS_SECRET_ACCESS_KEY",
    "region": "AWS_REGION",
    "s3_max_attempts": "AWS_MAX_ATTEMPTS",
}
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
DEFAULT_TIMEOUT_S = 60.0  # dlio_fast.storage_timeout's default (dlio.config.schema)
CONNECT_TIMEOUT_MAX_S = 20  # a TCP connect slower than this (s3dlio's own default) is a dead host


@dataclasses.dataclass(frozen=True)
class S3Settings:
    endpoint: str
    access_key: str
    secret_key: str
    region: str = "us-east-1"
    max_attempts: Optional[int] = None
    path_style_asked: Optional[bool] = None  # storage_options.s3_force_path_style, when given
    key_source: str = "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY"  # where the keys came from, for messages
    # The deadline of every request and of every silence of a worker process (dlio.storage.s3.deadline),
    # and how the user raises it: --timeout (io, ceiling) or the config key (run, generate).
    timeout_s: float = DEFAULT_TIMEOUT_S
    timeout_key: str = "dlio_fast.storage_timeout"

    def addressing_note(self) -> Optional[str]:
        """A word when the config asks for virtual-hosted addressing, which the client does not do."""
        if self.path_style_asked is False:
            return (
                "storage_options.s3_force_path_style is false (virtual-hosted BUCKET.HOST addressing); "
                "s3dlio addresses every bucket path-style (HOST/BUCKET), which S3-compatible servers and "
                "AWS accept: requests go path-style"
            )
        return None

    def child_env(self) -> dict:
        """The environment of a worker process: s3dlio reads its client settings from it once."""
        env = dict(os.environ)
        env.update(
            AWS_ENDPOINT_URL=self.endpoint,
            AWS_ACCESS_KEY_ID=self.access_key,
            AWS_SECRET_ACCESS_KEY=self.secret_key,
            AWS_REGION=self.region,
            # One GET per object, exactly as many in flight as asked: no client-side splitting.
            S3DLIO_ENABLE_RANGE_OPTIMIZATION="0",
            # The op-log (per-request times) must never drop a record when its queue is full.
            S3DLIO_OPLOG_LOSSLESS="1",
            # what s3dlio does for every request anyway (its client forces path-style); said explicitly
            AWS_S3_ADDRESSING_STYLE="path",
        )
        env.pop("AWS_PROFILE", None)
        # s3dlio's own deadlines: one request (its whole transfer, each attempt) and its TCP connect;
        # whole seconds (it parses an integer). A stalled response body is cut by the SDK's own
        # stalled-stream guard (no byte for 5 s).
        secs = max(1, math.ceil(self.timeout_s))
        env["S3DLIO_OPERATION_TIMEOUT_SECS"] = str(secs)
        env["S3DLIO_CONNECT_TIMEOUT_SECS"] = str(min(secs, CONNECT_TIMEOUT_MAX_S))
        # response buffers reuse freed pages instead of faulting in fresh ones (dlio.storage.s3.heap)
        for var, value in MALLOC_REUSE.items():
            env.setdefault(var, value)
        if self.max_attempts:
            # s3dlio retries on its own too: both limits, or a dead server takes 25-35 s to report
            env["AWS_MAX_ATTEMPTS"] = env["S3DLIO_MAX_RETRY_ATTEMPTS"] = str(self.max_attempts)
        return env


def resolve(
    endpoint: Optional[str] = None,
    storage_options: Optional[Mapping] = None,
    environ: Optional[Mapping] = None,
    timeout_s: Optional[float] = None,
    timeout_key: str = "dlio_fast.storage_timeout",
) -> S3Settings:
    """Settings from an explicit endpoint, then DLIO's storage_options, then the environment; the
    deadline of requests and worker silences (`timeout_key` names how the user sets it)."""
    env = os.environ if environ is None else environ
    opts = dict(storage_options or {})
    unknown = sorted(set(opts) - set(STORAGE_OPTION_ENV) - {"s3_force_path_style"})
    if unknown:
        raise DlioError(
            f"storage_options: unknown key(s) {', '.join(unknown)} "
            f"(known: {', '.join(sorted(STORAGE_OPTION_ENV))}, s3_force_path_style)"
        )

    def given(key: str) -> bool:
        return opts.get(key) not in (None, "")

    def pick(key: str) -> str:
        return str(opts[key]) if given(key) else env.get(STORAGE_OPTION_ENV[key], "")

    url = endpoint or pick("endpoint_url")
    if not url:
        raise DlioError(
            "no S3 endpoint: give --endpoint http://HOST:PORT, storage_options.endpoint_url or AWS_ENDPOINT_URL"
        )
    if not re.match(r"^https?://[^/\s]+/?$", url):
        raise DlioError(f"S3 endpoint {url!r}: expected http://HOST:PORT or https://HOST[:PORT]")
    ak, sk = pick("access_key_id"), pick("secret_access_key")
    if not ak or not sk:
        raise DlioError(
            "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
            "(or storage_options access_key_id / secret_access_key)"
        )
    style = opts.get("s3_force_path_style")
    if style is not None and not isinstance(style, bool):
        if str(style).strip().lower() not in ("true", "false"):
            raise DlioError(f"storage_options.s3_force_path_style {style!r}: expected true or false")
        style = str(style).strip().lower() == "true"
    attempts_text = pick("s3_max_attempts")
    try:
        attempts = int(attempts_text) if attempts_text else None
    except ValueError:
        raise DlioError(f"s3_max_attempts {attempts_text!r}: expected a whole number") from None
    region = pick("region") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
    source = " / ".join(
        f"storage_options.{k}" if given(k) else STORAGE_OPTION_ENV[k] for k in ("access_key_id", "secret_access_key")
    )
    timeout = DEFAULT_TIMEOUT_S if timeout_s is None else float(timeout_s)
    return S3Settings(url.rstrip("/"), ak, sk, region, attempts, style, source, timeout, timeout_key)


def parse_uri(uri: str) -> Tuple[str, str]:
    """'s3://bucket/some/prefix' -> ('bucket', 'some/prefix/'); the prefix is '' or ends with '/'."""
    if not uri.startswith("s3://"):
        raise DlioError(f"{uri!r}: expected s3://BUCKET[/PREFIX]")
    bucket, _, prefix = uri[5:].partition("/")
    if not _BUCKET.match(bucket):
        raise DlioError(f"{uri}: {bucket!r} is not a valid bucket name (3-63 characters: a-z, 0-9, '.', '-')")
    prefix = prefix.strip("/")
    prefix = prefix + "/" if prefix else ""
    check_key_length(bucket, prefix, prefix)
    return bucket, prefix


MAX_KEY_BYTES = 1024  # S3's longest object key, in UTF-8 bytes (longer: InvalidObjectName / KeyTooLongError)


def check_key_length(bucket: str, prefix: str, longest: str) -> None:
    """Refuse, before any request, a prefix whose keys (the longest is ``longest``) would pass S3's limit."""
    n, p = len(longest.encode()), len(prefix.encode())
    if n <= MAX_KEY_BYTES:
        return
    shown = f"s3://{bucket}/" + (prefix if len(prefix) <= 60 else f"{prefix[:40]}...{prefix[-12:]}")
    if longest == prefix:
        raise DlioError(
            f"{shown}: the prefix is {p} bytes, but S3 takes keys of at most {MAX_KEY_BYTES} bytes: "
            "use a shorter prefix"
        )
    added = n - p
    raise DlioError(
        f"{shown}: the prefix is {p} bytes and the object keys under it would be up to {n} bytes ({longest[p:]} "
        f"added), but S3 takes keys of at most {MAX_KEY_BYTES} bytes: use a shorter prefix (at most "
        f"{max(0, MAX_KEY_BYTES - added)} bytes)"
    )
