"""What an s3dlio error says: its class (auth, bucket, connect, other) and its useful words."""

from __future__ import annotations

# How much of each error text names the class of failure (s3dlio's messages carry the S3 code).
AUTH_CODES = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken", "ExpiredToken")


def classify(message: str) -> str:
    """'auth', 'bucket', 'connect' or 'other' for an s3dlio error message."""
    if any(c in message for c in AUTH_CODES):
        return "auth"
    if "NoSuchBucket" in message:
        return "bucket"
    if "dispatch failure" in message or "Connection refused" in message or "connection" in message.lower():
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
