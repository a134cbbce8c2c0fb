"""DLIO-compatible configuration: load, merge, validate, resolve.

A DLIO workload YAML loads unchanged, in either dialect (current main, or the 2.0.0 names that MLPerf
Storage v1 used; see ``schema.LEGACY``).  Layers, lowest to highest priority::

    schema defaults < built-in workload < --config file < DLIO_FAST_* environment < command line

The command line is ``sets`` (``dataset.num_files_train=16``) and ``dlio_overrides`` (DLIO's Hydra
spellings ``++workload.x=y``, ``+workload.x=y``, ``workload.x=y``, ``~workload.x``, ``workload=NAME``).

Every problem is a ``ConfigError`` whose message is one line naming the dotted key, the bad value, what
is allowed and where the value came from.  Unlike DLIO, unknown keys are errors (with the nearest valid
key suggested) and enum-like values are compared as values, case-insensitively: ``file_shuffle: off``
means off (DLIO keeps raw strings and compares them with Enums; see dlio-facts §9).

Deliberate differences from DLIO, all documented in ``schema.KEYS`` notes:
  * ``model.model_size`` (and 2.0.0's ``checkpoint.model_size``) set ``model.model_size_bytes``; DLIO's
    current code ignores ``model.model_size`` and writes a 10 KB model for unet3d.
  * ``checkpoint.fsync`` and ``checkpoint.recovery_rank_shift`` are honoured (typos in DLIO).
  * ``reader.data_loader`` defaults to ``pytorch`` (DLIO's default is a str that crashes).
  * framework/data_loader pairs that DLIO rejects are accepted: the loader decides the access pattern.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence, Tuple

import numpy as np
import yaml

from dlio.config import schema
from dlio.config.problem import problem, show
from dlio.errors import ConfigError
from dlio.config.timespec import TimeSpec, _is_number, _plain_number, parse_time  # noqa: F401
from dlio.config.schema import ENV, ENV_SCALE, KEYS, KEYS_BY_PATH, LEGACY, OPTIONAL_SECTIONS, SECTION_ALIASES, SECTIONS, Key
from dlio.config.workloads import list_workloads, workload_text
from dlio.config.workloads import resolve as _resolve_workload

__all__ = [
    "ConfigError", "TimeSpec", "Config", "load_config", "from_dict", "parse_override", "parse_time",
    "list_workloads", "workload_text", "scale_checkpoint_model",
]


# --------------------------------------------------------------------------------------------------
# YAML: PyYAML's SafeLoader with the YAML 1.2 float syntax (1e6 is a float), as OmegaConf/Hydra read it.


class _Loader(yaml.SafeLoader):
    pass


_FLOAT_TAG = "tag:yaml.org,2002:float"
_Loader.yaml_implicit_resolvers = {
    ch: [r for r in rs if r[0] != _FLOAT_TAG] for ch, rs in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    _FLOAT_TAG,
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def _yaml_load(text: str, where: str) -> Tuple[Any, Dict[str, int]]:
    """(data, {dotted key as written: line}) or ConfigError with file and line."""
    try:
        data = yaml.load(text, Loader=_Loader)
        node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        at = f"{where}:{mark.line + 1}:{mark.column + 1}" if mark else where
        problem = " ".join(str(x) for x in (e.context, e.problem) if x) or "syntax error"
        raise ConfigError(f"{at}: invalid YAML: {problem}", origin=where) from None
    except (yaml.YAMLError, RecursionError, ValueError, TypeError, OverflowError) as e:
        raise ConfigError(f"{where}: invalid YAML: {e}", origin=where) from None
    lines: Dict[str, int] = {}
    dup: list = []

    stack: set = set()
    budget = [200_000]   # nodes visited, aliases expanded: a workload file has ~100

    def walk(n: Any, prefix: str) -> None:
        budget[0] -= 1
        if budget[0] < 0:
            raise ConfigError(f"{where}: too many YAML nodes (aliases expanded); not a workload file", origin=where)
        if id(n) in stack:    # an alias to one of its own ancestors: DLIO (OmegaConf) cannot load it either
            raise ConfigError(f"{where}:{n.start_mark.line + 1}: recursive YAML alias under {prefix or 'top level'}",
                              key=prefix or None, origin=where)
        stack.add(id(n))
        if isinstance(n, yaml.MappingNode):
            seen = set()
            for kn, vn in n.value:
                if isinstance(kn, yaml.ScalarNode):
                    path = f"{prefix}.{kn.value}" if prefix else kn.value
                    if path in seen and not dup:
                        dup.append((path, kn.start_mark.line + 1))
                    seen.add(path)
                    lines.setdefault(path, kn.start_mark.line + 1)
                walk(vn, path if isinstance(kn, yaml.ScalarNode) else prefix)
        elif isinstance(n, yaml.SequenceNode):
            for vn in n.value:
                walk(vn, prefix)
        stack.discard(id(n))

    try:
        walk(node, "")
    except RecursionError:
        raise ConfigError(f"{where}: YAML nested too deeply", origin=where) from None
    if dup:
        path, line = dup[0]
        raise ConfigError(f"{where}:{line}: duplicate key {path}", key=path, origin=where)
    return data, lines




# --------------------------------------------------------------------------------------------------
# layers: each source becomes {canonical dotted key: _Entry}


class _Partial(dict):
    """Sub-fields of a time key set from the command line (``train.computation_time.stdev=0.1``)."""


_RESET = object()      # ~workload.key: back to the lower layers / default
class _Present:
    """An optional section (checkpoint.ksm) was given, possibly empty."""

    def __repr__(self) -> str:
        return "(section given)"


_PRESENT = _Present()


@dataclass
class _Entry:
    value: Any
    origin: str
    spelled: str
    raw: Optional[str] = None   # command-line / environment text, used as-is for string keys


_ALL_NAMES = tuple(sorted(set(KEYS_BY_PATH) | set(LEGACY) | set(SECTIONS)))


def _suggest(path: str) -> str:
    near = difflib.get_close_matches(path, _ALL_NAMES, n=1, cutoff=0.6)
    if not near:
        # same leaf name in another section, e.g. reader.epochs -> train.epochs
        leaf = path.rpartition(".")[2]
        near = [p for p in KEYS_BY_PATH if p.rpartition(".")[2] == leaf][:1]
    if near:
        return f"did you mean {near[0]}?"
    sec = path.rpartition(".")[0]
    if sec in SECTIONS:
        names = sorted(k.name for k in KEYS if k.section == sec and not k.hidden)
        return "valid keys here: " + ", ".join(names)
    return "valid sections: " + ", ".join(sorted(s for s in SECTIONS if "." not in s) + ["framework"])


def _canon_top(name: str) -> str:
    return SECTION_ALIASES.get(name, name)


class _Layer:
    def __init__(self, label: str, conflicts: bool):
        self.label = label
        self.conflicts = conflicts     # one file: two spellings of one key must agree
        self.entries: Dict[str, _Entry] = {}

    def put(self, canon: str, entry: _Entry) -> None:
        old = self.entries.get(canon)
        if (self.conflicts and old is not None and old.spelled != entry.spelled
                and not _same(old.value, entry.value)):
            raise ConfigError(
                f"{old.spelled} = {show(old.value)} ({old.origin}) and {entry.spelled} = {show(entry.value)} "
                f"({entry.origin}) are two spellings of {canon} with different values; keep one",
                canon, entry.value, entry.origin)
        self.entries[canon] = entry

    def add_tree(self, tree: Any, prefix_written: str, prefix_canon: str, origin_of) -> None:
        if not isinstance(tree, Mapping):
            raise ConfigError(f"{origin_of(prefix_written)}: expected a mapping of keys, got {show(tree)}")
        for k, v in tree.items():
            if not isinstance(k, str):
                where = prefix_written or "top level"
                raise problem(f"{where} key {show(k)}", v, origin_of(prefix_written), "keys must be strings")
            written = f"{prefix_written}.{k}" if prefix_written else k
            canon = f"{prefix_canon}.{k}" if prefix_canon else _canon_top(k)
            self.add_value(written, canon, v, origin_of)

    def add_value(self, written: str, canon: str, value: Any, origin_of) -> None:
        canon = LEGACY.get(canon, canon)
        origin = origin_of(written)
        if canon in KEYS_BY_PATH:
            self.put(canon, _Entry(value, origin, written))
        elif canon in OPTIONAL_SECTIONS:
            self.put(canon, _Entry(_PRESENT, origin, written))
            if value is not None:
                self.add_tree(value, written, canon, origin_of)
        elif canon in SECTIONS:
            if value is None:
                return
            if canon == "model" and isinstance(value, (str, int, float)) and not isinstance(value, bool):
                self.put("model.name", _Entry(str(value), origin, written))   # 2.0.0: `model: unet3d`
                return
            if not isinstance(value, Mapping):
                raise problem(written, value, origin, "expected a mapping (this is a section)")
            self.add_tree(value, written, canon, origin_of)
        else:
            # An unknown section: report its first leaf, so `datset.format` suggests dataset.format.
            while isinstance(value, Mapping) and value and isinstance(next(iter(value)), str):
                k = next(iter(value))
                written, canon, value = f"{written}.{k}", f"{canon}.{k}", value[k]
            raise problem(written, value, origin_of(written), "unknown key; " + _suggest(canon))


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b) or (_is_number(a) and _is_number(b) and a == b)
    except Exception:  # pragma: no cover
        return False


def _file_layer(text: str, label: str, where: str) -> _Layer:
    data, lines = _yaml_load(text, where)
    if data is None:
        raise ConfigError(f"{where}: empty workload file", origin=where)
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: the top level must be a mapping of DLIO sections, got {show(data)}",
                          origin=where)
    prefix = ""
    if len(data) == 1 and "workload" in data:
        data = data["workload"]
        prefix = "workload."
        if data is None:
            raise ConfigError(f"{where}: empty workload file", origin=where)
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: workload: must be a mapping of DLIO sections, got {show(data)}",
                              origin=where)
    layer = _Layer(label, conflicts=True)

    def origin_of(written: str) -> str:
        line = lines.get(prefix + written)
        return f"{where} line {line}" if line else where

    layer.add_tree(data, "", "", origin_of)
    return layer


# --------------------------------------------------------------------------------------------------
# command line and environment


def _parse_value(raw: str, key: str, origin: str) -> Any:
    """A command-line / environment value as a YAML scalar or flow list/map (Hydra-like)."""
    if raw.strip() == "":
        return ""
    k = KEYS_BY_PATH.get(LEGACY.get(key, key))
    if k is not None and k.type == "enum" and (raw.strip() in k.choices or raw.strip() in k.aliases):
        return raw.strip()  # a word of the key, even where YAML reads another type (null, off, yes)
    try:
        v = yaml.load(raw, Loader=_Loader)
        if isinstance(v, dict) and v and all(isinstance(k, str) and ":" in k and x is None for k, x in v.items()):
            v = yaml.load(re.sub(r":(?=\S)", ": ", raw), Loader=_Loader)   # Hydra's {mean:1,stdev:0.1}
    except (yaml.YAMLError, RecursionError, ValueError, TypeError, OverflowError) as e:
        raise problem(key, raw, origin, f"cannot parse the value ({' '.join(str(e).split())})") from None
    return v


def parse_override(text: str, dlio: bool = False) -> Optional[Tuple[str, Any, str]]:
    """Split one override into (dotted key, parsed value, raw text).

    ``dlio=False``: dlio-fast's ``KEY=VALUE`` (``--set``).  ``dlio=True``: DLIO/Hydra spellings
    ``++workload.KEY=VALUE``, ``+workload.KEY=VALUE``, ``workload.KEY=VALUE``, ``~workload.KEY`` (the key
    is returned with the value ``_RESET``), ``workload=NAME`` (key ``workload``).  Hydra's own
    ``hydra.*`` overrides change nothing here and give None.
    """
    if not isinstance(text, str):
        raise ConfigError(f"override {show(text)}: expected a KEY=VALUE string", origin="command line")
    origin = f"{'override' if dlio else '--set'} {text}"
    s = text.strip()
    delete = False
    if dlio:
        if s.startswith("++"):
            s = s[2:]
        elif s.startswith("+"):
            s = s[1:]
        elif s.startswith("~"):
            s, delete = s[1:], True
    key, eq, raw = s.partition("=")
    key = key.strip()
    if delete:
        eq, raw = "=", ""
    if not eq or not key or any(c.isspace() for c in key) or key.startswith(".") or key.endswith(".") \
            or ".." in key:
        form = "++workload.KEY=VALUE" if dlio else "KEY=VALUE (e.g. dataset.num_files_train=16)"
        raise ConfigError(f"override {show(text)}: expected {form} (from {origin})", origin=origin)
    if dlio:
        if key == "hydra" or key.startswith("hydra."):
            return None
        if key == "workload":
            if delete:
                raise ConfigError(f"override {show(text)}: cannot delete workload (from {origin})", origin=origin)
            return "workload", raw.strip(), raw
        if not key.startswith("workload."):
            raise ConfigError(f"override {show(text)}: DLIO overrides are workload.KEY=VALUE or workload=NAME "
                              f"(from {origin})", key=key, origin=origin)
        key = key[len("workload."):]
    if delete:
        return key, _RESET, ""
    return key, _parse_value(raw, key, origin), raw


def _add_dotted(layer: _Layer, written: str, value: Any, raw: Optional[str], origin: str) -> None:
    parts = written.split(".")
    parts[0] = _canon_top(parts[0])
    canon = LEGACY.get(".".join(parts), ".".join(parts))
    parent, _, leaf = canon.rpartition(".")
    if value is _RESET:
        if canon in KEYS_BY_PATH or canon in SECTIONS or canon == "framework":
            layer.put(canon, _Entry(_RESET, origin, written))
            return
        raise problem(written, None, origin, "unknown key; " + _suggest(canon))
    if parent in KEYS_BY_PATH and KEYS_BY_PATH[parent].type == "time":
        layer.put(parent, _Entry(_Partial({leaf: value}), origin, written))
        return
    # Build {a: {b: value}} and add it like a file, so aliases and sections behave the same.
    tree: Any = value
    for p in reversed(parts[1:]):
        tree = {p: tree}
    layer.add_value(parts[0], parts[0], tree, lambda _w: origin)
    e = layer.entries.get(canon)
    if e is not None and raw is not None and e.value is value:
        e.raw = raw


def _env_layer(env: Mapping[str, str]) -> _Layer:
    layer = _Layer("environment", conflicts=False)
    for name, path in ENV.items():
        if name in env:
            raw = env[name]
            origin = f"env {name}"
            layer.put(path, _Entry(_parse_value(raw, path, origin), origin, path, raw))
    return layer


# --------------------------------------------------------------------------------------------------
# validation of single values


def _range_text(k: Key) -> str:
    if k.lo is not None and k.hi is not None:
        return f" in {_plain_number(k.lo)}..{_plain_number(k.hi)}"
    if k.lo is not None:
        return f" >= {_plain_number(k.lo)}"
    if k.hi is not None:
        return f" <= {_plain_number(k.hi)}"
    return ""


def _check_range(k: Key, v: Any, e: _Entry, what: str) -> None:
    if (k.lo is not None and v < k.lo) or (k.hi is not None and v > k.hi):
        raise problem(k.path, e.value, e.origin, f"expected {what}{_range_text(k)}")


def _as_int(k: Key, v: Any, e: _Entry, what: str) -> int:
    if isinstance(v, bool) or not _is_number(v) or (isinstance(v, float) and not (math.isfinite(v) and v.is_integer())):
        raise problem(k.path, e.value, e.origin, f"expected {what}{_range_text(k)}")
    v = int(v)
    _check_range(k, v, e, what)
    return v


def _dtype_name(s: Any) -> Optional[str]:
    if not isinstance(s, str) or not s.strip():
        return None
    try:
        dt = np.dtype(s.strip().lower())
    except Exception:
        return None
    return dt.name if dt.kind in "biuf" else None


def _coerce(k: Key, e: _Entry) -> Any:
    v = e.value
    if v is None:
        if k.nullable or k.type == "time":
            return None
        raise problem(k.path, v, e.origin, f"a value is required ({_allowed(k)})")
    t = k.type
    if t == "int":
        return _as_int(k, v, e, "an integer")
    if t in ("num", "float", "stdev"):
        if not _is_number(v) or not math.isfinite(v):
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
            return e.raw.strip()                      # command line / env: the text as typed
        if isinstance(v, str):
            return v
        if _is_number(v):
            return str(v)
        raise problem(k.path, v, e.origin, "expected a string")
    if t == "enum":
        s = str(v).strip().lower() if isinstance(v, (str, bool, int)) else None
        if s is not None:
            s = k.aliases.get(s, s).replace("-", "_")
            if s in k.choices:
                return s
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
    raise AssertionError(f"schema type {t!r} of {k.path}")  # pragma: no cover


def _allowed(k: Key) -> str:
    return {
        "int": f"an integer{_range_text(k)}", "num": f"a number{_range_text(k)}",
        "float": f"a number{_range_text(k)}", "bool": "true or false", "str": "a string",
        "enum": "one of " + ", ".join(k.choices), "ints": "a list of integers", "strs": "a list of strings",
        "map": "a mapping", "stdev": "a number >= 0",
    }.get(k.type, "a value")


# --------------------------------------------------------------------------------------------------
# scaling


def scale_checkpoint_model(values: Dict[str, Any], factor: float) -> None:
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
    """
    if factor == 1.0:
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


def _apply_scale(values: Dict[str, Any], sources: Dict[str, str], factor: float, origin: str) -> None:
    """Shrink (or grow) the dataset by ``factor``, keeping sample size, batch size and compute time."""
    tr, ev = values["dataset.num_files_train"], values["dataset.num_files_eval"]

    def scaled(n: int) -> int:
        return max(1, int(round(n * factor)))

    if max(tr, ev) == 1:
        values["dataset.num_samples_per_file"] = scaled(values["dataset.num_samples_per_file"])
        sources["dataset.num_samples_per_file"] = origin
    for split in ("train", "eval"):
        key = f"dataset.num_files_{split}"
        if values[key] > 1:
            values[key] = scaled(values[key])
            sources[key] = origin
        sub = f"dataset.num_subfolders_{split}"
        if values[sub] > values[key]:
            values[sub] = values[key] if values[key] > 1 else 0
            sources[sub] = origin
    scale_checkpoint_model(values, factor)


# --------------------------------------------------------------------------------------------------
# cross-key validation


def _check_all(values: Dict[str, Any], sources: Dict[str, str]) -> None:
    def v(k: str) -> Any:
        return values[k]

    def err2(k1: str, k2: str, problem: str) -> ConfigError:
        return ConfigError(f"{k1} = {show(v(k1))} (from {sources[k1]}) with {k2} = {show(v(k2))} "
                           f"(from {sources[k2]}): {problem}", k1, v(k1), sources[k1])

    for split in ("train", "eval"):
        k = f"dataset.num_subfolders_{split}"
        if v(k) == 1:
            raise problem(k, 1, sources[k], "expected 0 (flat) or >= 2 subfolders (DLIO fails on 1)")
    dims = v("dataset.record_dims")
    if dims and v("dataset.record_length_bytes_stdev") > 0:
        raise err2("dataset.record_dims", "dataset.record_length_bytes_stdev",
                   "record_dims gives a fixed shape; a size stdev is not allowed with it")
    if v("dataset.format") in ("jpeg", "png"):
        if len(dims) > 2:
            raise err2("dataset.record_dims", "dataset.format", "jpeg/png images have at most 2 dimensions")
        if v("dataset.record_element_type") != "uint8":
            raise err2("dataset.record_element_type", "dataset.format", "jpeg/png images need uint8")
    if v("dataset.format") == "hdf5" and dims and dims[0] % v("dataset.hdf5.num_dset_per_record"):
        raise err2("dataset.record_dims", "dataset.hdf5.num_dset_per_record",
                   "record_dims[0] must be a multiple of num_dset_per_record")
    w, r = v("checkpoint.num_checkpoints_write"), v("checkpoint.num_checkpoints_read")
    if w > 0 and r > w:
        raise err2("checkpoint.num_checkpoints_read", "checkpoint.num_checkpoints_write",
                   "cannot read more checkpoints than are written")
    if v("model.parallelism.zero_stage") == 3 and v("model.parallelism.pipeline") > 1:
        raise err2("model.parallelism.zero_stage", "model.parallelism.pipeline",
                   "ZeRO stage 3 is not compatible with pipeline parallelism > 1")
    if 0 < v("model.num_layers") < v("model.parallelism.pipeline"):
        raise err2("model.num_layers", "model.parallelism.pipeline",
                   "need at least as many layers as pipeline stages")
    if v("checkpoint.mode") == "subset" and v("model.parallelism.data") <= 0:
        raise err2("checkpoint.mode", "model.parallelism.data",
                   "subset checkpointing needs model.parallelism.data >= 1")
    if values.get("checkpoint.ksm") is _PRESENT and v("checkpoint.randomize_tensor"):
        raise err2("checkpoint.randomize_tensor", "checkpoint.ksm",
                   "KSM merges identical pages: set checkpoint.randomize_tensor: false")


# --------------------------------------------------------------------------------------------------
# the frozen config objects, built from the schema


def _section_classes() -> Dict[str, type]:
    classes: Dict[str, type] = {}
    for sec in sorted(SECTIONS, key=lambda s: -s.count(".")):
        fields = []
        for k in KEYS:
            if k.section == sec and not k.hidden:
                fields.append((k.name, Any, field(metadata={"key": k, "help": k.help})))
        for child in sorted(SECTIONS):
            if child.rpartition(".")[0] == sec:
                fields.append((child.rpartition(".")[2], Any, field(metadata={"section": child})))
        name = "".join(p.title().replace("_", "") for p in sec.split(".")) + "Config"
        classes[sec] = dataclasses.make_dataclass(name, fields, frozen=True)
        classes[sec].__module__ = __name__
        classes[sec].__doc__ = f"The {sec} section of a workload (fields and help: dlio.schema.KEYS)."
    return classes


_CLASSES = _section_classes()
for _cls in _CLASSES.values():
    globals()[_cls.__name__] = _cls
_TOP = tuple(s for s in schema.sections() if "." not in s)


@dataclass(frozen=True)
class Config:
    """A resolved, validated workload.  Sections are frozen dataclasses named like DLIO's:
    ``cfg.dataset.num_files_train``, ``cfg.reader.batch_size``, ``cfg.train.computation_time`` (a
    ``TimeSpec``), ``cfg.model.parallelism.tensor``, ``cfg.checkpoint.ksm`` (None unless given),
    ``cfg.dlio_fast.engine`` ...  ``framework`` is a string.  ``sources`` maps every dotted key to where
    its value came from ("default", a file and line, "--set ...", "env NAME", "scale ...")."""

    framework: str
    model: Any
    workflow: Any
    dataset: Any
    reader: Any
    train: Any
    evaluation: Any
    checkpoint: Any
    output: Any
    metric: Any
    profiling: Any
    storage: Any
    dlio_fast: Any
    workload: Optional[str] = None
    config_file: Optional[str] = None
    scale: float = 1.0
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    # -- access ---------------------------------------------------------------------------------

    def get(self, dotted: str) -> Any:
        """Value of a dotted key (current or legacy spelling), e.g. ``cfg.get("reader.batch_size")``."""
        obj: Any = self
        for part in LEGACY.get(dotted, dotted).split("."):
            part = SECTION_ALIASES.get(part, part)
            if obj is None or not hasattr(obj, part):
                raise KeyError(dotted)
            obj = getattr(obj, part)
        return obj

    def origin(self, dotted: str) -> str:
        return self.sources.get(LEGACY.get(dotted, dotted), "default")

    def to_dict(self) -> Dict[str, Any]:
        """The full resolved config as nested plain data, current DLIO names, loadable by DLIO and by
        ``load_config``.  Keys whose value is None (unset optional keys, an absent ksm) are left out."""

        def conv(obj: Any) -> Any:
            if dataclasses.is_dataclass(obj) and not isinstance(obj, type) and not isinstance(obj, TimeSpec):
                out = {}
                for f in dataclasses.fields(obj):
                    val = conv(getattr(obj, f.name))
                    if val is not None:
                        out[f.name] = val
                return out
            if isinstance(obj, TimeSpec):
                return obj.to_yaml()
            if isinstance(obj, tuple):
                return [conv(x) for x in obj]
            if isinstance(obj, Mapping):
                return {k: conv(x) for k, x in obj.items()}
            return obj

        out: Dict[str, Any] = {"model": conv(self.model), "framework": self.framework}
        for sec in _TOP:
            if sec != "model":
                out[sec] = conv(getattr(self, sec))
        return out

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=False)

    # -- derived values (pure) ------------------------------------------------------------------

    def record_bytes(self) -> float:
        """Nominal bytes per sample: prod(record_dims) * itemsize if record_dims, else record_length_bytes."""
        ds = self.dataset
        if ds.record_dims:
            return int(np.prod(ds.record_dims, dtype=np.int64)) * np.dtype(ds.record_element_type).itemsize
        return ds.record_length_bytes

    def is_checkpoint_only(self) -> bool:
        return (not self.workflow.train) and self.workflow.checkpoint

    def steps_per_epoch(self, comm_size: int = 1) -> int:
        """Training steps per rank per epoch: floor(files * spf / (batch * ranks)), capped by
        train.total_training_steps when > 0 (DLIO's per-epoch cap, dlio-facts §3.7)."""
        comm_size = _check_comm(comm_size)
        n = self.dataset.num_files_train * self.dataset.num_samples_per_file // (self.reader.batch_size * comm_size)
        cap = self.train.total_training_steps
        return min(n, cap) if cap > 0 else n

    def eval_steps_per_epoch(self, comm_size: int = 1) -> int:
        """Evaluation steps per rank: floor(eval files * spf / (batch_size_eval * ranks))."""
        comm_size = _check_comm(comm_size)
        return (self.dataset.num_files_eval * self.dataset.num_samples_per_file
                // (self.reader.batch_size_eval * comm_size))


def _check_comm(comm_size: Any) -> int:
    if isinstance(comm_size, bool) or not isinstance(comm_size, (int, np.integer)) or comm_size < 1:
        raise ConfigError(f"comm_size = {show(comm_size)}: expected an integer >= 1", "comm_size", comm_size)
    return int(comm_size)


def _build(values: Dict[str, Any]) -> Dict[str, Any]:
    built: Dict[str, Any] = {}
    for sec in sorted(SECTIONS, key=lambda s: -s.count(".")):
        if sec in OPTIONAL_SECTIONS and values.get(sec) is not _PRESENT:
            built[sec] = None
            continue
        kw = {}
        for f in dataclasses.fields(_CLASSES[sec]):
            if "key" in f.metadata:
                kw[f.name] = values[f.metadata["key"].path]
            else:
                kw[f.name] = built[f.metadata["section"]]
        built[sec] = _CLASSES[sec](**kw)
    return built


# --------------------------------------------------------------------------------------------------
# loading


def _resolve(layers: Sequence[_Layer], scale: Any, scale_origin: str, workload: Optional[str],
             config_file: Optional[str]) -> Config:
    merged: Dict[str, _Entry] = {}
    for layer in layers:
        for canon, e in layer.entries.items():
            if e.value is _RESET:
                for k in [k for k in merged if k == canon or k.startswith(canon + ".")]:
                    del merged[k]
            elif isinstance(e.value, _Partial):
                base = merged.get(canon)
                bv = base.value if base is not None else None
                if isinstance(bv, Mapping):
                    d = dict(bv)
                elif bv is None:
                    d = {}
                else:
                    d = {"mean": bv}
                d.update(e.value)
                merged[canon] = _Entry(d, e.origin, e.spelled)
            else:
                merged[canon] = e

    values: Dict[str, Any] = {}
    sources: Dict[str, str] = {}
    for k in KEYS:
        e = merged.get(k.path)
        if e is None:
            e = _Entry(k.default, "default", k.path)
        elif k.type != "time":
            sources[k.path] = e.origin
        if k.type != "time":
            values[k.path] = _coerce(k, e)
    for k in KEYS:   # times last: they fold in their *_stdev sibling
        if k.type == "time":
            e = merged.get(k.path) or _Entry(None, "default", k.path)
            sib = merged.get(k.path + "_stdev")
            origin = e.origin if sib is None or e.origin == sib.origin else f"{e.origin} and {sib.origin}"
            values[k.path] = parse_time(e.value, values[k.path + "_stdev"], k.path, origin)
            if k.path in merged or sib is not None:
                sources[k.path] = origin
    for sec in OPTIONAL_SECTIONS:
        if sec in merged:
            values[sec] = _PRESENT
            sources[sec] = merged[sec].origin

    for path in ("dataset.data_folder", "checkpoint.checkpoint_folder"):
        values[path] = values[path].rstrip("/") or values[path][:1]
        if not values[path]:
            raise problem(path, "", sources.get(path, "default"), "expected a non-empty path")
    for path in ("dataset.record_element_type", "reader.transformed_record_element_type"):
        name = _dtype_name(values[path])
        if name is None:
            raise problem(path, values[path], sources.get(path, "default"),
                       "expected a numeric numpy dtype (uint8, int32, float16, float32, ...)")
        values[path] = name

    factor = 1.0
    if scale is not None:
        if isinstance(scale, str):
            scale = _parse_value(scale, "scale", scale_origin)
        if not _is_number(scale) or not math.isfinite(scale) or scale <= 0:
            raise problem("scale", scale, scale_origin, "expected a number > 0 (1 keeps the dataset as configured)")
        factor = float(scale)
        if factor != 1.0:
            _apply_scale(values, sources, factor, f"{scale_origin} {_plain_number(factor)}")

    _check_all(values, {k.path: sources.get(k.path, "default") for k in KEYS} | sources)
    built = _build(values)
    return Config(framework=values["framework"], **{s: built[s] for s in _TOP},
                  workload=workload, config_file=config_file, scale=factor,
                  sources=MappingProxyType(dict(sources)))


def _workload_layer(name: str) -> _Layer:
    try:
        real = _resolve_workload(name)
    except ConfigError as e:
        raise ConfigError(str(e), "workload", name, "workload name") from None
    label = f"workload {name}" if real == name else f"workload {name} ({real})"
    return _file_layer(workload_text(real), label, label)


def load_config(workload: Optional[str] = None, config_file: Optional[str] = None, sets: Iterable[str] = (),
                dlio_overrides: Iterable[str] = (), env: Optional[Mapping[str, str]] = None,
                scale: Optional[float] = None, options: Optional[Mapping[str, Tuple[Any, str]]] = None) -> Config:
    """Load, merge and validate a workload.

    Precedence, highest first: ``sets`` and ``dlio_overrides`` (command line; ``sets`` after the
    overrides), ``env`` (``DLIO_FAST_*``, see ``schema.ENV``; default ``os.environ``), ``config_file``
    (a DLIO workload YAML: the workload group content, or one ``workload:`` root key), the built-in
    ``workload`` (``workload=NAME`` in ``dlio_overrides`` selects it too), the schema defaults.

    ``options`` are command-line options that set a key: {dotted key: (value, origin such as
    "--engine")}, values as typed (no text to parse), below ``sets`` in precedence.

    ``scale`` (or ``DLIO_FAST_SCALE``) F > 0 multiplies the number of files of each split that has
    more than one, or the samples per file when every split has one file; sample size, batch size and
    compute time are unchanged and subfolders are capped at the number of files.
    """
    env = os.environ if env is None else env
    cli = _Layer("command line", conflicts=False)
    for text in tuple(dlio_overrides):
        parsed = parse_override(text, dlio=True)
        if parsed is None:
            continue
        key, value, raw = parsed
        if key == "workload":
            if workload is not None and workload != value:
                raise ConfigError(f"workload = {value!r} (from override {text}) conflicts with workload = "
                                  f"{workload!r} given separately; give one", "workload", value, f"override {text}")
            workload = value
            continue
        _add_dotted(cli, key, value, raw, f"override {text}")
    for key, (value, origin) in (options or {}).items():
        _add_dotted(cli, key, value, None, origin)
    if isinstance(sets, str):
        sets = (sets,)
    for text in tuple(sets):
        key, value, raw = parse_override(text, dlio=False)   # type: ignore[misc]
        _add_dotted(cli, key, value, raw, f"--set {text}")

    layers = []
    if workload is not None:
        layers.append(_workload_layer(workload))
    if config_file is not None:
        path = os.fspath(config_file)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ConfigError(f"{path}: cannot read the workload file: {e.strerror or e}", origin=path) from None
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: not a text (UTF-8) file", origin=path) from None
        layers.append(_file_layer(text, path, path))
    layers.append(_env_layer(env))
    layers.append(cli)

    scale_origin = "scale argument"
    if scale is None and ENV_SCALE in env:
        scale, scale_origin = env[ENV_SCALE], f"env {ENV_SCALE}"
    return _resolve(layers, scale, scale_origin, workload, None if config_file is None else os.fspath(config_file))


def from_dict(tree: Any, source: str = "<dict>", sets: Iterable[str] = (), scale: Optional[float] = None) -> Config:
    """A Config from already-parsed workload data (the content of a workload YAML), no environment."""
    layer = _Layer(source, conflicts=True)
    if tree is None:
        raise ConfigError(f"{source}: empty workload file", origin=source)
    if isinstance(tree, Mapping) and len(tree) == 1 and "workload" in tree:
        tree = tree["workload"]
    layer.add_tree(tree, "", "", lambda _w: source)
    cli = _Layer("command line", conflicts=False)
    for text in ((sets,) if isinstance(sets, str) else tuple(sets)):
        key, value, raw = parse_override(text)   # type: ignore[misc]
        _add_dotted(cli, key, value, raw, f"--set {text}")
    return _resolve([layer, cli], scale, "scale argument", None, None)
