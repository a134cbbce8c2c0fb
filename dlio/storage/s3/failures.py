"""What an s3dlio error says: its class (auth, bucket, connect, timeout, files, other) and its useful words."""

from __future__ import annotations

# How much of each error text names the class of failure (s3dlio's messages carry the S3 code).
AUTH_CODES = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken", "ExpiredToken")
# This host's limits, not the endpoint's doing: EMFILE (24, the process's RLIMIT_NOFILE), ENFILE (23,
# the system's file table). They surface inside connect errors ("dispatch failure ... connection").
FILE_LIMIT_WORDS = ("Too many open files", "os error 24", "os error 23", "file table overflow")
# s3dlio's deadline of one request (S3DLIO_OPERATION_TIMEOUT_SECS) and the SDK's stalled-stream guard
TIMEOUT_WORDS = ("timed out", "timeout", "minimum throughput was specified")


def classify(message: str) -> str:
    """'auth', 'bucket', 'files', 'timeout', 'connect' or 'other' for an s3dlio error message."""
    if any(w in message for w in FILE_LIMIT_WORDS):
        return "files"
    if any(c in message for c in AUTH_CODES):
        return "auth"
    if "NoSuchBucket" in message:
        return "bucket"
    if "Connection refused" in message or "os error 111" in message:  # s3dlio words it "connection timeout" too
        return "connect"
    if any(w in message for w in TIMEOUT_WORDS):
        return "timeout"
    if "dispatch failure" in message or "connection" in message.lower():
        return "connect"
    return "other"


def short(message: str) -> str:
    """The useful part of an s3dlio error: after 'service error:' or the whole first line."""
    m = str(message).splitlines()[0] if str(message) else repr(message)
    for tag in ("service error: ", "failed: "):
        if tag in m:
            m = m.split(tag, 1)[1]
            break
    return m.replace(" ()", "")[:400]
