"""Objects' sizes from a listing, and the boto3 client for the few requests s3dlio does not make.

A dataset, a model or an index on S3 is taken as there only when each object has the size it was made
with: an object cut short or replaced by another upload would be read as if it were the planned one (or
fail half-way through a run). ListObjectsV2 gives every key's size, one request per 1,000 objects, where
s3dlio's listing gives names only and a HEAD per object would cost a request each.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Sequence

import numpy as np

from dlio.base.errors import DlioError
from dlio.storage.s3.settings import S3Settings, parse_uri

MISSING = -1  # the size given for an object that is not listed


def boto_client(settings: S3Settings) -> Any:
    """A boto3 client bounded as the workers' requests are (timeouts and attempts from the settings)."""
    import boto3
    from botocore.config import Config

    cfg = Config(
        s3={"addressing_style": "path"},
        connect_timeout=min(settings.timeout_s, 10),
        read_timeout=settings.timeout_s,
        retries={"max_attempts": settings.max_attempts or 3, "mode": "standard"},
    )
    return boto3.client(
        "s3",
        endpoint_url=settings.endpoint,
        aws_access_key_id=settings.access_key,
        aws_secret_access_key=settings.secret_key,
        region_name=settings.region,
        config=cfg,
    )


def _listed(settings: S3Settings, bucket: str, prefix: str) -> Dict[str, int]:
    """key -> size of every object under the prefix, page by page."""
    from botocore.exceptions import BotoCoreError, ClientError

    out: Dict[str, int] = {}
    try:
        pages = boto_client(settings).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for page in pages:
            out.update((o["Key"], int(o["Size"])) for o in page.get("Contents") or ())
    except (ClientError, BotoCoreError) as e:
        where = f"s3://{bucket}/{prefix}"
        raise DlioError(f"{where}: could not list the objects' sizes at {settings.endpoint}: {e}") from None
    return out


def object_sizes(settings: S3Settings, names: Sequence[str]) -> np.ndarray:
    """The size of each s3:// name (MISSING where it is not listed): one listing of their common folder."""
    sizes = np.full(len(names), MISSING, dtype=np.int64)
    if not len(names):
        return sizes
    common = os.path.commonprefix(list(names))
    bucket, prefix = parse_uri(common[: common.rfind("/") + 1])
    listed = _listed(settings, bucket, prefix)
    start = len(f"s3://{bucket}/")
    for i, name in enumerate(names):
        sizes[i] = listed.get(name[start:], MISSING)
    return sizes
