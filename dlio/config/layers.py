"""The layers of a config: a YAML file, the environment, the command line, each as {canonical
dotted key: Entry} with where every value came from (file and line, --set, env)."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Tuple

import yaml

from dlio.base.errors import ConfigError
from dlio.config.problem import problem, show
from dlio.config.schema import ENV, KEYS, KEYS_BY_PATH, LEGACY, OPTIONAL_SECTIONS, SECTION_ALIASES, SECTIONS
from dlio.config.timespec import TimeSpec, is_number, parse_time, plain_number  # noqa: F401

# --------------------------------------------------------------------------------------------------
# YAML: PyYAML's SafeLoader with the YAML 1.2 float syntax (1e6 is a float), as OmegaConf/Hydra read it.


class _Loader(yaml.SafeLoader):
    pass


# The same loader on libyaml's parser (C), 10x faster at parsing: every command that loads a config, and
# `workloads` loads all 45 built-in files. A file it refuses is parsed again by the Python loader,
# whose messages (file:line:column, the problem) are the ones users see.
class _CLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    pass


_FAST = getattr(yaml, "__with_libyaml__", False)  # else _CLoader is the Python loader again
_FLOAT_TAG = "tag:yaml.org,2002:float"
for _cls in (_Loader, _CLoader):
    _cls.yaml_implicit_resolvers = {
        ch: [r for r in rs if r[0] != _FLOAT_TAG] for ch, rs in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    _cls.add_implicit_resolver(
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


def _parse(text: str, loader_class: Any) -> Tuple[Any, Any]:
    """(data, node) of a one-document YAML text, parsed once (yaml.load's steps, keeping the node)."""
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        return (loader.construct_document(node) if node is not None else None), node
    finally:
        loader.dispose()


def yaml_load(text: str, where: str) -> Tuple[Any, Dict[str, int]]:
    """(data, {dotted key as written: line}) or ConfigError with file and line."""
    try:
        try:
            data, node = _parse(text, _CLoader)
        except yaml.YAMLError:
            if not _FAST:
                raise
            data, node = _parse(text, _Loader)  # its message, or its reading where libyaml is stricter
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
    budget = [200_000]  # nodes visited, aliases expanded: a workload file has ~100

    def walk(n: Any, prefix: str) -> None:
        budget[0] -= 1
        if budget[0] < 0:
            raise ConfigError(f"{where}: too many YAML nodes (aliases expanded); not a workload file", origin=where)
        if id(n) in stack:  # an alias to one of its own ancestors: DLIO (OmegaConf) cannot load it either
            raise ConfigError(
                f"{where}:{n.start_mark.line + 1}: recursive YAML alias under {prefix or 'top level'}",
                key=prefix or None,
                origin=where,
            )
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
# layers: each source becomes {canonical dotted key: Entry}


class Partial(dict):
    """Sub-fields of a time key or keys of a map set from the command line (``train.computation_time.stdev=0.1``,
    ``storage.storage_options.endpoint_url=...``)."""


RESET = object()  # ~workload.key: back to the lower layers / default


class Present:
    """An optional section (checkpoint.ksm) was given, possibly empty."""

    def __repr__(self) -> str:
        return "(section given)"


PRESENT = Present()


@dataclass
class Entry:
    value: Any
    origin: str
    spelled: str
    raw: Optional[str] = None  # command-line / environment text, used as-is for string keys


_ALL_NAMES = tuple(sorted(set(KEYS_BY_PATH) | set(LEGACY) | set(SECTIONS)))


def nearest(path: str) -> Optional[str]:
    """The valid key or section nearest to an unknown dotted `path`, or None when nothing is near."""
    near = difflib.get_close_matches(path, _ALL_NAMES, n=1, cutoff=0.6)
    if not near:
        # same leaf name in another section, e.g. reader.epochs -> train.epochs
        leaf = path.rpartition(".")[2]
        near = [p for p in KEYS_BY_PATH if p.rpartition(".")[2] == leaf][:1]
    return near[0] if near else None


def nearest_key(path: str) -> str:
    """The valid key nearest to `path`, always one (a warning names it): the nearest at all, else the
    closest-spelled key of the same section, else of any section."""
    near = nearest(path)
    if near is not None and near not in SECTIONS:
        return near
    sec = path.rpartition(".")[0]
    pool = [k.path for k in KEYS if not k.hidden and k.section == sec] or [k.path for k in KEYS if not k.hidden]
    return (difflib.get_close_matches(path, pool, n=1, cutoff=0.0) or pool[:1])[0]


def suggest(path: str) -> str:
    near = nearest(path)
    if near:
        return f"did you mean {near}?"
    sec = path.rpartition(".")[0]
    if sec in SECTIONS:
        names = sorted(k.name for k in KEYS if k.section == sec and not k.hidden)
        return "valid keys here: " + ", ".join(names)
    return "valid sections: " + ", ".join(sorted(s for s in SECTIONS if "." not in s) + ["framework"])


def canon_top(name: str) -> str:
    return SECTION_ALIASES.get(name, name)


HYDRA_RUN_DIR = "hydra.run.dir"  # DLIO's output folder when output.folder is not set
HYDRA_OUTPUT_SUBDIR = "hydra.output_subdir"  # where Hydra writes config.yaml / overrides.yaml (default .hydra)


class Layer:
    """One source of values.  A `lenient` layer (a workload file) keeps keys DLIO does not know in
    `unknown` (DLIO ignores them; the resolver warns) where a strict one (the command line) refuses
    them; `hydra` holds Hydra's own settings (`hydra.run.dir` and the others), canonical path -> Entry."""

    def __init__(self, label: str, conflicts: bool, lenient: bool = False):
        self.label = label
        self.conflicts = conflicts  # one file: two spellings of one key must agree
        self.lenient = lenient
        self.entries: Dict[str, Entry] = {}
        self.unknown: Dict[str, Entry] = {}
        self.hydra: Dict[str, Entry] = {}

    def put(self, canon: str, entry: Entry) -> None:
        old = self.entries.get(canon)
        if self.conflicts and old is not None and old.spelled != entry.spelled and not _same(old.value, entry.value):
            raise ConfigError(
                f"{old.spelled} = {show(old.value)} ({old.origin}) and {entry.spelled} = {show(entry.value)} "
                f"({entry.origin}) are two spellings of {canon} with different values; keep one",
                canon,
                entry.value,
                entry.origin,
            )
        self.entries[canon] = entry

    def add_tree(self, tree: Any, prefix_written: str, prefix_canon: str, origin_of: Callable[[str], str]) -> None:
        if not isinstance(tree, Mapping):
            raise ConfigError(f"{origin_of(prefix_written)}: expected a mapping of keys, got {show(tree)}")
        for k, v in tree.items():
            if not isinstance(k, str):
                where = prefix_written or "top level"
                raise problem(f"{where} key {show(k)}", v, origin_of(prefix_written), "keys must be strings")
            written = f"{prefix_written}.{k}" if prefix_written else k
            canon = f"{prefix_canon}.{k}" if prefix_canon else canon_top(k)
            self.add_value(written, canon, v, origin_of)

    def add_value(self, written: str, canon: str, value: Any, origin_of: Callable[[str], str]) -> None:
        canon = LEGACY.get(canon, canon)
        origin = origin_of(written)
        if canon in KEYS_BY_PATH:
            self.put(canon, Entry(value, origin, written))
        elif canon in OPTIONAL_SECTIONS:
            self.put(canon, Entry(PRESENT, origin, written))
            if value is not None:
                self.add_tree(value, written, canon, origin_of)
        elif canon in SECTIONS:
            if value is None:
                return
            if canon == "model" and isinstance(value, (str, int, float)) and not isinstance(value, bool):
                self.put("model.name", Entry(str(value), origin, written))  # 2.0.0: `model: unet3d`
                return
            if not isinstance(value, Mapping):
                raise problem(written, value, origin, "expected a mapping (this is a section)")
            self.add_tree(value, written, canon, origin_of)
        elif canon == "hydra" or canon.startswith("hydra."):
            for w, c, v in _leaves(written, canon, value):
                self.hydra[c] = Entry(v, origin_of(w), w)
        elif self.lenient:
            for w, c, v in _leaves(written, canon, value):
                self.unknown[c] = Entry(v, origin_of(w), w)
        else:
            # An unknown section: report its first leaf, so `datset.format` suggests dataset.format.
            while isinstance(value, Mapping) and value and isinstance(next(iter(value)), str):
                k = next(iter(value))
                written, canon, value = f"{written}.{k}", f"{canon}.{k}", value[k]
            raise problem(written, value, origin_of(written), "unknown key; " + suggest(canon))


def _leaves(written: str, canon: str, value: Any) -> Iterator[Tuple[str, str, Any]]:
    """(written, canonical, value) of every leaf under an unknown key (a non-mapping or empty value)."""
    if isinstance(value, Mapping) and value:
        for k, v in value.items():
            yield from _leaves(f"{written}.{k}", f"{canon}.{k}", v)
    else:
        yield written, canon, value


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b) or (is_number(a) and is_number(b) and a == b)
    except Exception:  # pragma: no cover
        return False


def file_layer(text: str, label: str, where: str) -> Layer:
    data, lines = yaml_load(text, where)
    if data is None:
        raise ConfigError(f"{where}: empty workload file", origin=where)
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: the top level must be a mapping of DLIO sections, got {show(data)}", origin=where)
    prefix = ""
    hydra = None
    if "workload" in data and set(data) <= {"workload", "hydra"}:  # DLIO's composed config (+ its hydra:)
        hydra = data.get("hydra")
        data = data["workload"]
        prefix = "workload."
        if data is None:
            raise ConfigError(f"{where}: empty workload file", origin=where)
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: workload: must be a mapping of DLIO sections, got {show(data)}", origin=where)
    layer = Layer(label, conflicts=True, lenient=True)

    def origin_of(written: str) -> str:
        line = lines.get(prefix + written)
        return f"{where} line {line}" if line else where

    layer.add_tree(data, "", "", origin_of)
    if hydra is not None:
        line = lines.get("hydra")
        layer.add_value("hydra", "hydra", hydra, lambda w: f"{where} line {lines.get(w, line)}")
    return layer


# --------------------------------------------------------------------------------------------------
# command line and environment


def parse_value(raw: str, key: str, origin: str) -> Any:
    """A command-line / environment value as a YAML scalar or flow list/map (Hydra-like)."""
    if raw.strip() == "":
        return ""
    k = KEYS_BY_PATH.get(LEGACY.get(key, key))
    if k is not None and k.type == "enum" and (raw.strip() in k.choices or raw.strip() in k.aliases):
        return raw.strip()  # a word of the key, even where YAML reads another type (null, off, yes)
    try:
        v = yaml.load(raw, Loader=_Loader)
        if isinstance(v, dict) and v and all(isinstance(k, str) and ":" in k and x is None for k, x in v.items()):
            v = yaml.load(re.sub(r":(?=\S)", ": ", raw), Loader=_Loader)  # Hydra's {mean:1,stdev:0.1}
    except (yaml.YAMLError, RecursionError, ValueError, TypeError, OverflowError) as e:
        raise problem(key, raw, origin, f"cannot parse the value ({' '.join(str(e).split())})") from None
    return v


def parse_override(text: str, dlio: bool = False) -> Optional[Tuple[str, Any, str]]:
    """Split one override into (dotted key, parsed value, raw text).

    ``dlio=False``: dlio-fast's ``KEY=VALUE`` (``--set``).  ``dlio=True``: DLIO/Hydra spellings
    ``++workload.KEY=VALUE``, ``+workload.KEY=VALUE``, ``workload.KEY=VALUE``, ``~workload.KEY`` (the key
    is returned with the value ``RESET``), ``workload=NAME`` (key ``workload``), and Hydra's own
    ``hydra.KEY=VALUE`` (key ``hydra.KEY``; ``hydra.run.dir``'s value is the path as typed, the others are
    YAML like a key's: ``hydra.output_subdir=null`` is None; ``~hydra.KEY`` and a bare ``hydra=...`` give
    None).
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
    if not eq or not key or any(c.isspace() for c in key) or key.startswith(".") or key.endswith(".") or ".." in key:
        form = "++workload.KEY=VALUE" if dlio else "KEY=VALUE (e.g. dataset.num_files_train=16)"
        raise ConfigError(f"override {show(text)}: expected {form} (from {origin})", origin=origin)
    if dlio:
        if key == "hydra" or key.startswith("hydra."):
            if delete or key == "hydra":
                return None
            return key, (raw.strip() if key == HYDRA_RUN_DIR else parse_value(raw, key, origin)), raw
        if key == "workload":
            if delete:
                raise ConfigError(f"override {show(text)}: cannot delete workload (from {origin})", origin=origin)
            return "workload", raw.strip(), raw
        if not key.startswith("workload."):
            raise ConfigError(
                f"override {show(text)}: DLIO overrides are workload.KEY=VALUE or workload=NAME (from {origin})",
                key=key,
                origin=origin,
            )
        key = key[len("workload.") :]
    if delete:
        return key, RESET, ""
    return key, parse_value(raw, key, origin), raw


def add_dotted(layer: Layer, written: str, value: Any, raw: Optional[str], origin: str) -> None:
    parts = written.split(".")
    parts[0] = canon_top(parts[0])
    canon = LEGACY.get(".".join(parts), ".".join(parts))
    parent, _, leaf = canon.rpartition(".")
    if value is RESET:  # an unknown key too: a lower layer (a file) may carry it; the resolver checks
        layer.put(canon, Entry(RESET, origin, written))
        return
    # one field of a time key, or one key inside a map (++workload.storage.storage_options.endpoint_url=...,
    # as Hydra does): merged into the lower layers' value, not replacing it
    if parent in KEYS_BY_PATH and KEYS_BY_PATH[parent].type in ("time", "map"):
        old = layer.entries.get(parent)
        fields = dict(old.value) if old is not None and isinstance(old.value, Partial) else {}
        layer.put(parent, Entry(Partial({**fields, leaf: value}), origin, written))
        return
    # Build {a: {b: value}} and add it like a file, so aliases and sections behave the same.
    tree: Any = value
    for p in reversed(parts[1:]):
        tree = {p: tree}
    layer.add_value(parts[0], parts[0], tree, lambda _w: origin)
    e = layer.entries.get(canon)
    if e is not None and raw is not None and e.value is value:
        e.raw = raw


def env_layer(env: Mapping[str, str]) -> Layer:
    layer = Layer("environment", conflicts=False)
    for name, path in ENV.items():
        if name in env:
            raw = env[name]
            origin = f"env {name}"
            layer.put(path, Entry(parse_value(raw, path, origin), origin, path, raw))
    return layer
