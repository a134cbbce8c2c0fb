"""Workload datasets on S3, DLIO's way: storage.storage_type s3, storage.storage_root the bucket,
dataset.data_folder a prefix in it (or s3://BUCKET/PREFIX), storage.storage_options the endpoint
and keys (else the AWS_* variables).

The objects carry the very bytes the file generator writes: a dataset is generated into a local
staging folder by the same C generator (dlio.dataset.generate), then PUT (parallel PUTs, multipart
for large objects) under the prefix with the same relative names, its manifest included
(PREFIX/.dlio-fast/manifest-*.npz). A run fetches the manifests into a local folder and plans from
them exactly as on a filesystem; each planned read becomes a GET of the object or a range GET of
the sample's bytes (dlio.objstore.trainrun).
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import shutil
import tempfile
import time
from typing import Callable, List, Optional, Tuple

import numpy as np

from dlio.dataset.spec import MANIFEST_DIR, DatasetSpec, dataset_bytes, file_paths
from dlio.errors import ConfigError, DlioError
from dlio.objstore import client
from dlio.objstore.settings import S3Settings, parse_uri, resolve

ENGINE = "s3dlio"  # the engine name in results


def is_s3(cfg) -> bool:
    return cfg.storage.storage_type == "s3"


@dataclasses.dataclass(frozen=True)
class S3Dataset:
    """Where a workload's dataset lives on S3 and how to reach it."""

    settings: S3Settings
    bucket: str
    prefix: str  # '' or ends with '/'

    def uri(self, rel: str = "") -> str:
        return f"s3://{self.bucket}/{self.prefix}{rel}"


def location(cfg) -> Tuple[str, str]:
    """(bucket, prefix) from storage.storage_root and dataset.data_folder, as DLIO spells them: the
    data folder is s3://BUCKET[/PREFIX] (DLIO's S3 configs) or a prefix inside storage_root."""
    root = str(cfg.storage.storage_root or "").strip()
    folder = str(cfg.dataset.data_folder or "").strip()
    if folder.startswith("s3://"):
        bucket, prefix = parse_uri(folder)
        if root not in ("", "./", ".") and root.strip("/") != bucket:
            raise ConfigError(
                f"dataset.data_folder {folder!r} is in bucket {bucket!r} but storage.storage_root is {root!r}; "
                "make them name the same bucket",
                "storage.storage_root",
                root,
            )
        return bucket, prefix
    if root in ("", "./", "."):
        raise ConfigError(
            "storage.storage_type = 's3' needs the bucket in storage.storage_root (e.g. "
            "storage.storage_root=mybucket) or dataset.data_folder=s3://BUCKET/PREFIX",
            "storage.storage_root",
            root,
        )
    bucket, _ = parse_uri("s3://" + root.strip("/"))
    rel = folder
    while rel.startswith("./"):
        rel = rel[2:]
    return parse_uri(f"s3://{bucket}/{rel.strip('/')}")


def resolve_dataset(cfg) -> S3Dataset:
    """The dataset's bucket, prefix and settings; a config problem is a one-line error."""
    if cfg.dlio_fast.cache in ("drop", "drop-all"):
        raise ConfigError(
            f"dlio_fast.cache = {cfg.dlio_fast.cache}: dropping the page cache has no meaning on S3 (no client "
            "cache; the server's caches are its own): leave --cache out",
            "dlio_fast.cache",
            cfg.dlio_fast.cache,
        )
    bucket, prefix = location(cfg)
    return S3Dataset(resolve(None, cfg.storage.storage_options), bucket, prefix)


def check(ds: S3Dataset) -> None:
    """Before any work: the endpoint answers, the keys are accepted, the bucket exists."""
    client.require_client()
    client.check_access(ds.settings, ds.bucket, ds.prefix)


_LOCAL = {}


def local_folder(ds: S3Dataset) -> str:
    """A local folder standing for the prefix: it holds the fetched manifests (removed at exit)."""
    key = (ds.settings.endpoint, ds.bucket, ds.prefix)
    if key not in _LOCAL:
        d = tempfile.mkdtemp(prefix="dlio-fast-s3-")
        atexit.register(shutil.rmtree, d, True)
        _LOCAL[key] = d
    return _LOCAL[key]


def local_spec(spec: DatasetSpec, ds: S3Dataset) -> DatasetSpec:
    """The spec with the local stand-in folder as its data folder (manifests are found there)."""
    return dataclasses.replace(spec, data_folder=local_folder(ds))


def to_uris(ds: S3Dataset, folder: str, paths: List[str]) -> List[str]:
    """Local paths under `folder` -> the objects' s3:// URIs (same relative names)."""
    cut = len(folder.rstrip("/")) + 1
    return [ds.uri(p[cut:]) for p in paths]


def fetch_manifests(ds: S3Dataset, spec: DatasetSpec) -> bool:
    """Download PREFIX/.dlio-fast/manifest-{train,valid}.npz into the local folder; False when
    a split's manifest is not there (the dataset is missing or incomplete)."""
    folder = local_folder(ds)
    os.makedirs(os.path.join(folder, MANIFEST_DIR), exist_ok=True)
    want = [s for s in ("train", "valid") if spec.num_files(s)]
    names = [f"{MANIFEST_DIR}/manifest-{s}.npz" for s in want]
    out = client.run_task(
        ds.settings,
        {"task": "fetch", "uris": [ds.uri(n) for n in names], "dests": [os.path.join(folder, n) for n in names]},
    )
    return all(out["found"])


def present(ds: S3Dataset, spec: DatasetSpec) -> bool:
    """The manifests are there and every object of both splits is listed under the prefix."""
    if not fetch_manifests(ds, spec):
        return False
    listed = set(client.run_task(ds.settings, {"task": "list_all", "bucket": ds.bucket, "prefix": ds.prefix})["uris"])
    lspec = local_spec(spec, ds)
    for split in ("train", "valid"):
        if spec.num_files(split):
            uris = np.array(to_uris(ds, lspec.data_folder, file_paths(lspec, split)))
            if not np.isin(uris, np.array(sorted(listed) or [""])).all():
                return False
    return True


def complete(ds: S3Dataset, spec: DatasetSpec) -> bool:
    """Every object is there and the manifests say it was generated with this config's content."""
    from dlio.dataset.mismatch import check_dataset_matches

    if not present(ds, spec):
        return False
    try:
        for split in ("train", "valid"):
            check_dataset_matches(local_spec(spec, ds), split)
    except DlioError:
        return False
    return True


def generate(
    ds: S3Dataset,
    spec: DatasetSpec,
    comm,
    echo: Callable[[str], None],
    progress=None,
    threads: Optional[int] = None,
    checksum: bool = False,
) -> None:
    """Generate the dataset into a local staging folder (the file generator's bytes) and PUT it
    under the prefix, manifests included. Rank 0 does it (one staging folder, one manifest);
    the other ranks wait."""
    from dlio.dataset.generate import generate as generate_files

    total_bytes = dataset_bytes(spec)
    total_files = spec.num_files_train + spec.num_files_eval
    echo(f"Starting data generation: {total_files} objects, {total_bytes / 2**30:.2f} GiB in {ds.uri()}")
    problem = None
    done = comm.bcast(complete(ds, spec) if comm.rank == 0 else None)
    if done:
        echo(f"Generation done: the dataset in {ds.uri()} is complete and matches the config; nothing written")
        return
    if comm.rank == 0:
        t0 = time.monotonic()
        stage = tempfile.mkdtemp(prefix="dlio-fast-s3-stage-", dir=os.environ.get("DLIO_FAST_S3_STAGING"))
        try:
            cb = None
            if progress is not None:
                cb = lambda b, f: progress.generation(b, f, total_bytes, total_files)  # noqa: E731
                cb(0, 0)
            res = generate_files(
                dataclasses.replace(spec, data_folder=stage),
                threads=threads or max(2, os.cpu_count() or 2),
                progress=cb,
                checksum=checksum,
            )
            if progress is not None:
                progress.done()
            out = client.run_task(
                ds.settings, {"task": "upload_tree", "folder": stage, "bucket": ds.bucket, "prefix": ds.prefix}
            )
            dt = time.monotonic() - t0
            echo(
                f"Generation done: {out['bytes'] / 2**30:.2f} GiB in {out['objects']} objects PUT in {dt:.1f} s "
                f"({out['bytes'] / 2**20 / max(dt, 1e-9):.0f} MiB/s, generation and upload), "
                f"{res.files_written} files generated"
            )
        except DlioError as e:
            problem = str(e)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
    problem = comm.bcast(problem)
    if problem:
        raise DlioError(problem)
