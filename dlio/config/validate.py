"""Validation: one value against its schema row (type, bounds, choices), the keys against each other,
and --scale applied to a resolved set of values."""

from __future__ import annotations

import math
import os
from types import MappingProxyType
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from dlio.base.errors import ConfigError
from dlio.base.units import parse_size
from dlio.config.layers import PRESENT, Entry
from dlio.config.problem import problem, show
from dlio.config.schema import Key
from dlio.config.timespec import TimeSpec, is_number, parse_time, plain_number  # noqa: F401

# --------------------------------------------------------------------------------------------------
# validation of single values


def _range_text(k: Key) -> str:
    if k.lo is not None and k.hi is not None:
        return f" in {plain_number(k.lo)}..{plain_number(k.hi)}"
    if k.lo is not None:
        return f" >= {plain_number(k.lo)}"
    if k.hi is not None:
        return f" <= {plain_number(k.hi)}"
    return ""


# Past 2**53 a number loses integer precision and overflows the C core's 64-bit counters (bytes in
# ns, offsets): a key without its own upper bound is held to this one.
HUGE = 2**53


def _check_range(k: Key, v: Any, e: Entry, what: str) -> None:
    if (k.lo is not None and v < k.lo) or (k.hi is not None and v > k.hi):
        raise problem(k.path, e.value, e.origin, f"expected {what}{_range_text(k)}")
    if k.hi is None and abs(v) > HUGE:
        raise problem(k.path, e.value, e.origin, f"expected {what} of at most {HUGE} (2**53); {v:.3g} overflows")


def _as_int(k: Key, v: Any, e: Entry, what: str) -> int:
    if isinstance(v, bool) or not is_number(v) or (isinstance(v, float) and not (math.isfinite(v) and v.is_integer())):
        raise problem(k.path, e.value, e.origin, f"expected {what}{_range_text(k)}")
    v = int(v)
    _check_range(k, v, e, what)
    return v


def dtype_name(s: Any) -> Optional[str]:
    """The numpy name of a numeric dtype as typed (int8, float32...), None when it is not one."""
    if not isinstance(s, str) or not s.strip():
        return None
    try:
        dt = np.dtype(s.strip().lower())
    except Exception:
        return None
    return dt.name if dt.kind in "biuf" else None


def coerce(k: Key, e: Entry) -> Any:
    v = e.value
    if v is None:
        if k.nullable or k.type == "time":
            return None
        raise problem(k.path, v, e.origin, f"a value is required ({_allowed(k)})")
    t = k.type
    if t == "int":
        return _as_int(k, v, e, "an integer")
    if t == "bytes":
        if isinstance(v, str):
            try:
                v = parse_size(v.strip())
            except ValueError:
                raise problem(k.path, v, e.origin, f"expected a size (4096, 300m, 16GiB){_range_text(k)}") from None
        return _as_int(k, v, e, "a size in bytes")
    if t in ("num", "float", "stdev"):
        if not is_number(v) or not math.isfinite(v):
            raise problem(k.path, v, e.origin, f"expected a number{_range_text(k)}")
        _check_range(k, v, e, "a number")
        return float(v) if t in ("float", "stdev") else v
    if t == "bool":
        if isinstance(v, bool):
            return v
        if isinstance(v, int) and v in (0, 1):
            return bool(v)
        if isinstance(v, str) and v.strip().lower() in ("true", "false", "yes", "no", "on", "off"):
            return v.strip().lower() in ("true", "yes", "on")
        raise problem(k.path, v, e.origin, "expected true or false")
    if t == "str":
        if e.raw is not None and not isinstance(v, str):
            return e.raw.strip()  # command line / env: the text as typed
        if isinstance(v, str):
            return v
        if is_number(v):
            return str(v)
        raise problem(k.path, v, e.origin, "expected a string")
    if t == "enum":
        s = str(v).strip().lower() if isinstance(v, (str, bool, int)) else None
        if s is not None:
            # '-' and '_' are one letter here (io-uring, drop_all): compared as typed, returned as the row spells it
            canon = {c.lower().replace("-", "_"): c for c in k.choices}
            s = k.aliases.get(s, s).replace("-", "_")
            if s in canon:
                return canon[s]
        raise problem(k.path, v, e.origin, f"expected one of {', '.join(k.choices)}")
    if t == "ints":
        if not isinstance(v, (list, tuple)):
            raise problem(k.path, v, e.origin, f"expected a list of integers{_range_text(k)}, e.g. [1, 2]")
        return tuple(_as_int(k, x, e, "a list of integers") for x in v)
    if t == "strs":
        if isinstance(v, str):
            return (v,)
        if isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
            return tuple(v)
        raise problem(k.path, v, e.origin, "expected a string or a list of strings")
    if t == "map":
        if isinstance(v, Mapping):
            return MappingProxyType(dict(v))
        raise problem(k.path, v, e.origin, "expected a mapping")
    if t == "records":
        if isinstance(v, (list, tuple)) and all(isinstance(x, Mapping) for x in v):
            return tuple(MappingProxyType(dict(x)) for x in v)
        raise problem(k.path, v, e.origin, "expected a list of mappings, e.g. [{name: label, dtype: float32}]")
    raise AssertionError(f"schema type {t!r} of {k.path}")  # pragma: no cover


def _allowed(k: Key) -> str:
    return {
        "int": f"an integer{_range_text(k)}",
        "bytes": f"a size in bytes (4096, 300m, 16GiB){_range_text(k)}",
        "num": f"a number{_range_text(k)}",
        "float": f"a number{_range_text(k)}",
        "bool": "true or false",
        "str": "a string",
        "enum": "one of " + ", ".join(k.choices),
        "ints": "a list of integers",
        "strs": "a list of strings",
        "map": "a mapping",
        "records": "a list of mappings",
        "stdev": "a number >= 0",
    }.get(k.type, "a value")


# --------------------------------------------------------------------------------------------------
# scaling


def scale_checkpoint_model(values: Dict[str, Any], factor: float, given: Any = lambda key: False) -> None:
    """Shrink (or grow) the checkpoint by about ``factor`` with ``--scale``, keeping its layout.

    Parallelism (tensor, pipeline, data, ZeRO stage), dtypes, heads and kv heads are never changed,
    so the ranks that write and the file names stay those of the full model.  The rule:

    * Transformer (``num_layers > 0`` without legacy ``layer_parameters``): parameters grow as width
      squared, so hidden_size is multiplied by sqrt(factor) and rounded to a multiple of
      num_attention_heads (at least one per head), and ffn_hidden_size and vocab_size follow
      hidden_size's ratio.  Only when the widths hit that floor and the total is still more than
      ~1.5x too large is num_layers reduced, never below the pipeline stages (a PP > 1 model then
      writes fewer layer files).  Layers are never added.
    * Legacy ``layer_parameters`` / ``optimization_groups``: every element times factor.
    * ``model_size_bytes`` (non-transformer models): times factor.
    Sizes are rounded and kept >= 1 where they were > 0.  ``values`` maps dotted keys to values.
    A model the user sized explicitly (``given(key)`` for one of its size keys) keeps its size.
    """
    sizing: Tuple[str, ...] = (
        "model.model_size_bytes",
        "model.layer_parameters",
        "model.optimization_groups",
        "model.num_layers",
    )
    sizing += tuple(f"model.transformer.{k}" for k in ("hidden_size", "ffn_hidden_size", "vocab_size"))
    if factor == 1.0 or any(given(k) for k in sizing):
        return None

    def sc(n: int) -> int:
        return max(1, int(round(n * factor))) if n > 0 else n

    if values["model.model_size_bytes"] > 0:
        values["model.model_size_bytes"] = sc(values["model.model_size_bytes"])
    for key in ("model.layer_parameters", "model.optimization_groups"):
        if values[key]:
            values[key] = tuple(sc(int(x)) for x in values[key])
    L = values["model.num_layers"]
    if L <= 0 or values["model.layer_parameters"]:
        return None
    t = "model.transformer."
    H, FFN, V = values[t + "hidden_size"], values[t + "ffn_hidden_size"], values[t + "vocab_size"]
    heads, kv = values[t + "num_attention_heads"], values[t + "num_kv_heads"]

    def nparam(L_: int, H_: int, F_: int, V_: int) -> int:
        dkv = (H_ // heads) * kv
        return 2 * V_ * H_ + L_ * (2 * H_ + H_ * (H_ + 2 * dkv) + H_ * H_ + 3 * H_ * F_) + H_

    full = nparam(L, H, FFN, V)
    H2 = max(heads, int(round(H * math.sqrt(factor) / heads)) * heads)
    F2 = max(1, int(round(FFN * H2 / H)))
    V2 = max(1, int(round(V * H2 / H)))
    L2 = L
    left = factor * full / nparam(L, H2, F2, V2)
    if left < 1 / 1.5:
        L2 = max(values["model.parallelism.pipeline"], min(L, int(round(L * left))))
    values[t + "hidden_size"], values[t + "ffn_hidden_size"], values[t + "vocab_size"] = H2, F2, V2
    values["model.num_layers"] = L2
    return None


# Where a value typed for this run comes from (the command line, a DLIO override, the environment):
# --scale shrinks the workload's values, never one the user gave explicitly.
EXPLICIT = ("--", "override ", "env ")


def apply_scale(values: Dict[str, Any], sources: Dict[str, str], factor: float, origin: str) -> None:
    """Shrink (or grow) the dataset by ``factor``, keeping sample size, batch size and compute time;
    a count given explicitly (``--set dataset.num_files_train=100 --scale 0.5``) stays as given."""
    tr, ev = values["dataset.num_files_train"], values["dataset.num_files_eval"]

    def scaled(n: int) -> int:
        return max(1, int(round(n * factor)))

    def given(key: str) -> bool:
        return sources.get(key, "default").startswith(EXPLICIT)

    if max(tr, ev) == 1 and not given("dataset.num_samples_per_file"):
        values["dataset.num_samples_per_file"] = scaled(values["dataset.num_samples_per_file"])
        sources["dataset.num_samples_per_file"] = origin
    for split in ("train", "eval"):
        key = f"dataset.num_files_{split}"
        if values[key] > 1 and not given(key):
            values[key] = scaled(values[key])
            sources[key] = origin
        sub = f"dataset.num_subfolders_{split}"
        if values[sub] > values[key]:
            values[sub] = values[key] if values[key] > 1 else 0
            sources[sub] = origin
    scale_checkpoint_model(values, factor, given)
    if values.get("workflow.vdb") and not given("vdb.vectors"):  # vector search: the collection
        values["vdb.vectors"] = max(VDB_MIN_VECTORS, scaled(values["vdb.vectors"]))
        sources["vdb.vectors"] = origin


VDB_MIN_VECTORS = 1000  # a scaled collection keeps a graph worth searching (the medoid and its hops)

# Families whose workload --scale has nothing to shrink in (no dataset or checkpoint model): refused, not
# ignored (a KV run at --scale 0.01 was the full 300 s x 3 trials of 200 users), with what to set instead
NOT_SCALED = {
    "workflow.kvcache": "the KV cache has no dataset to shrink: shorten it with kvcache.duration, "
    "kvcache.trials or kvcache.users",
    "workflow.model_load": "the model's size is what a load measures: pick a smaller one with "
    "model_load.model=generic and model_load.model_bytes",
}


def scale_refused(values: Dict[str, Any]) -> Optional[str]:
    """Why --scale cannot apply to this workload's family, or None."""
    return next((why for flag, why in NOT_SCALED.items() if values.get(flag)), None)


# A family's data folder key, and the folder it takes inside dataset.data_folder
FAMILY_FOLDERS = {
    "workflow.vdb": ("vdb.index_folder", "vdb"),
    "workflow.kvcache": ("kvcache.cache_dir", "kvcache"),
    "workflow.model_load": ("checkpoint.checkpoint_folder", "model"),
}


def follow_data_folder(values: Dict[str, Any], sources: Dict[str, str]) -> None:
    """dataset.data_folder given for this run and the family's own folder key not: the family's data goes in
    it (vdb/, kvcache/, model/ inside), as training's does, not in the workload's folder under the current
    one."""
    if not sources.get("dataset.data_folder", "default").startswith(EXPLICIT):
        return
    for flag, (key, sub) in FAMILY_FOLDERS.items():
        if values.get(flag) and not sources.get(key, "default").startswith(EXPLICIT):
            values[key] = os.path.join(str(values["dataset.data_folder"]), sub)
            sources[key] = f"dataset.data_folder ({sources['dataset.data_folder']})"


# --------------------------------------------------------------------------------------------------
# cross-key validation


def check_all(values: Dict[str, Any], sources: Dict[str, str]) -> None:
    def v(k: str) -> Any:
        return values[k]

    def err2(k1: str, k2: str, problem: str) -> ConfigError:
        return ConfigError(
            f"{k1} = {show(v(k1))} (from {sources[k1]}) with {k2} = {show(v(k2))} (from {sources[k2]}): {problem}",
            k1,
            v(k1),
            sources[k1],
        )

    for split in ("train", "eval"):
        k = f"dataset.num_subfolders_{split}"
        if v(k) == 1:
            raise problem(k, 1, sources[k], "expected 0 (flat) or >= 2 subfolders (DLIO fails on 1)")
    dims = v("dataset.record_dims")
    if dims and v("dataset.record_length_bytes_stdev") > 0:
        raise err2(
            "dataset.record_dims",
            "dataset.record_length_bytes_stdev",
            "record_dims gives a fixed shape; a size stdev is not allowed with it",
        )
    if v("dataset.format") in ("jpeg", "png"):
        if len(dims) > 2:
            raise err2("dataset.record_dims", "dataset.format", "jpeg/png images have at most 2 dimensions")
        if v("dataset.record_element_type") != "uint8":
            raise err2("dataset.record_element_type", "dataset.format", "jpeg/png images need uint8")
    if v("dataset.format") == "hdf5" and dims and dims[0] % v("dataset.hdf5.num_dset_per_record"):
        raise err2(
            "dataset.record_dims",
            "dataset.hdf5.num_dset_per_record",
            "record_dims[0] must be a multiple of num_dset_per_record",
        )
    if v("storage.endpoint_uris"):  # MLPerf Storage's multi-endpoint s3dlio configs (hybrid_storage.yaml)
        raise problem(
            "storage.endpoint_uris",
            list(v("storage.endpoint_uris")),
            sources["storage.endpoint_uris"],
            "several S3 endpoints spread over the ranks are not supported yet; give one endpoint "
            "(storage.storage_options.endpoint_url) and remove endpoint_uris",
        )
    if v("storage.storage_type") != "local_fs" and str(v("checkpoint.checkpoint_folder")).startswith("file://"):
        raise err2(
            "checkpoint.checkpoint_folder",
            "storage.storage_type",
            "checkpoints on files beside a dataset on S3 are not supported yet (one storage per run)",
        )
    w, r = v("checkpoint.num_checkpoints_write"), v("checkpoint.num_checkpoints_read")
    if w > 0 and r > w:
        raise err2(
            "checkpoint.num_checkpoints_read",
            "checkpoint.num_checkpoints_write",
            "cannot read more checkpoints than are written",
        )
    if v("model.parallelism.zero_stage") == 3 and v("model.parallelism.pipeline") > 1:
        raise err2(
            "model.parallelism.zero_stage",
            "model.parallelism.pipeline",
            "ZeRO stage 3 is not compatible with pipeline parallelism > 1",
        )
    if 0 < v("model.num_layers") < v("model.parallelism.pipeline"):
        raise err2("model.num_layers", "model.parallelism.pipeline", "need at least as many layers as pipeline stages")
    if v("checkpoint.mode") == "subset" and v("model.parallelism.data") <= 0:
        raise err2(
            "checkpoint.mode", "model.parallelism.data", "subset checkpointing needs model.parallelism.data >= 1"
        )
    if values.get("checkpoint.ksm") is PRESENT and v("checkpoint.randomize_tensor"):
        raise err2(
            "checkpoint.randomize_tensor",
            "checkpoint.ksm",
            "KSM merges identical pages: set checkpoint.randomize_tensor: false",
        )
    if v("checkpoint.async_save") and v("workflow.checkpoint") and not v("workflow.train"):
        raise err2(
            "checkpoint.async_save",
            "workflow.train",
            "an asynchronous save overlaps training's reads, and a checkpoint-only run has none; set "
            "workflow.train: true, or leave checkpoint.async_save out",
        )
