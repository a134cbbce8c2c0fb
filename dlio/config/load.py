"""DLIO-compatible configuration: load, merge, validate, resolve.

A DLIO workload YAML loads unchanged, in either dialect (current main, or the 2.0.0 names that MLPerf
Storage v1 used; see ``schema.LEGACY``).  Layers, lowest to highest priority::

    schema defaults < built-in workload < --config file < DLIO_FAST_* environment < command line

The command line is ``sets`` (``dataset.num_files_train=16``) and ``dlio_overrides`` (DLIO's Hydra
spellings ``++workload.x=y``, ``+workload.x=y``, ``workload.x=y``, ``~workload.x``, ``workload=NAME``,
``hydra.run.dir=DIR``).

Every problem is a ``ConfigError`` whose message is one line naming the dotted key, the bad value, what
is allowed and where the value came from.  Enum-like values are compared as values, case-insensitively:
``file_shuffle: off`` means off (DLIO keeps raw strings and compares them with Enums; see
docs/dlio-facts.md §9).

Keys as DLIO treats them (``Config.warnings``, one line each, printed once on stderr and kept in the
results as ``config_warnings``; the wording is in ``dlio.config.emulation``):
  * A key DLIO does not know is a warning when a file carries it (DLIO ignores it, so the file runs;
    2.0.0's dlrm.yaml has ``workflow.do_eval``): file:line, the key, the nearest valid key, "ignored
    (DLIO ignores it too)".  Typed on the command line (``--set``, ``++workload.x``) it is an error
    with the nearest key suggested: there it is a typo.  The environment only has known keys.
  * A key DLIO honours and dlio-fast does not emulate is a warning naming what is not emulated
    (``emulation.NOT_EMULATED``: profiling, shuffle_size, read_type memory, keep_files false, log_file,
    plugin classes, ksm).  2.0.0's ``checkpoint.type`` is honoured (``dlio.checkpoint.layout``).
  * ``~workload.KEY`` deletes any key: one a lower layer set goes back to the layer below or its
    default; an unknown key a file carried goes, and its warning with it; a known key nobody set is
    accepted (it is at its default already; Hydra refuses it, but which keys a workload file happens
    to carry is not something a user sees); an unknown key nobody set is an error (a typo).
  * ``hydra.run.dir`` (command line, or a file's ``hydra: {run: {dir: DIR}}``) is the output folder
    when ``output.folder`` is not set, as in DLIO; ``${...}`` interpolations are refused.  Other
    ``hydra.*`` settings are warnings (dlio-fast does not run Hydra).
  * ``workload=NAME`` next to ``--config FILE``: DLIO loads NAME.yaml (``--config-dir DIR
    workload=NAME``), so FILE alone is the workload when it is NAME.yaml, and anything else is refused
    as two workloads (``--workload NAME --config FILE`` lays the file over the built-in NAME).

Deliberate differences from DLIO, all documented in ``schema.KEYS`` notes:
  * ``model.model_size`` (and 2.0.0's ``checkpoint.model_size``) set ``model.model_size_bytes``; DLIO's
    current code ignores ``model.model_size`` and writes a 10 KB model for unet3d.
  * ``checkpoint.fsync`` and ``checkpoint.recovery_rank_shift`` are honoured (typos in DLIO).
  * ``reader.data_loader`` defaults to ``pytorch`` (DLIO's default is a str that crashes).
  * framework/data_loader pairs that DLIO rejects are accepted: the loader decides the access pattern.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Type, TypeVar, cast

import numpy as np
import yaml

from dlio.base.errors import ConfigError, DlioError
from dlio.base.inputs import YAML_CAP, read_regular
from dlio.config import schema
from dlio.config.emulation import HYDRA_HONOURED, hydra_warning, not_emulated, unknown_key_warning
from dlio.config.families import SECTIONS as FAMILY_SECTIONS
from dlio.config.layers import (
    HYDRA_OUTPUT_SUBDIR,
    HYDRA_RUN_DIR,
    PRESENT,
    RESET,
    Entry,
    Layer,
    Partial,
    add_dotted,
    env_layer,
    file_layer,
    parse_override,
    parse_value,
    suggest,
)
from dlio.config.problem import problem, show
from dlio.config.schema import (
    ENV_SCALE,
    KEYS,
    KEYS_BY_PATH,
    LEGACY,
    LEGACY_ONLY,
    OPTIONAL_SECTIONS,
    SECTION_ALIASES,
    SECTIONS,
)
from dlio.config.sections import (
    CLASSES,
    CheckpointConfig,
    DatasetConfig,
    DlioFastConfig,
    EvaluationConfig,
    Framework,
    MetricConfig,
    ModelConfig,
    OutputConfig,
    ProfilingConfig,
    ReaderConfig,
    StorageConfig,
    TrainConfig,
    WorkflowConfig,
)
from dlio.config.timespec import TimeSpec, is_number, parse_time, plain_number  # noqa: F401
from dlio.config.validate import apply_scale, check_all, coerce, dtype_name, follow_data_folder, scale_refused
from dlio.config.workloads import resolve as _resolve_workload
from dlio.config.workloads import workload_text

# --------------------------------------------------------------------------------------------------
# the frozen config objects: the section classes are generated from the schema (dlio.config.sections)

_TOP = tuple(s for s in schema.sections() if "." not in s)
_FAMILY_TOP = frozenset(FAMILY_SECTIONS)  # the workload families' sections: Config.families, not fields
_SECTION_OF = {cls: s for s, cls in CLASSES.items() if s in _FAMILY_TOP}
_S = TypeVar("_S")


@dataclass(frozen=True)
class Config:
    """A resolved, validated workload.  Sections are frozen dataclasses named like DLIO's:
    ``cfg.dataset.num_files_train``, ``cfg.reader.batch_size``, ``cfg.train.computation_time`` (a
    ``TimeSpec``), ``cfg.model.parallelism.tensor``, ``cfg.checkpoint.ksm`` (None unless given),
    ``cfg.dlio_fast.engine`` ...  ``framework`` is a string.  ``sources`` maps every dotted key to where
    its value came from ("default", a file and line, "--set ...", "env NAME", "scale ...")."""

    framework: Framework
    model: ModelConfig
    workflow: WorkflowConfig
    dataset: DatasetConfig
    reader: ReaderConfig
    train: TrainConfig
    evaluation: EvaluationConfig
    checkpoint: CheckpointConfig
    output: OutputConfig
    metric: MetricConfig
    profiling: ProfilingConfig
    storage: StorageConfig
    dlio_fast: DlioFastConfig
    # each workload family's section by name (kvcache, model_load, vdb, ...): cfg.section(VdbConfig)
    families: Mapping[str, Any]
    workload: Optional[str] = None
    config_file: Optional[str] = None
    scale: float = 1.0
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    # One line each: keys DLIO ignores that a file carried, keys DLIO honours that are not emulated.
    warnings: Tuple[str, ...] = field(default=(), compare=False, repr=False)
    # Hydra's settings as given (command line, or a file's hydra: section), e.g. {"hydra.output_subdir":
    # "configs"}: hydra.run.dir is output.folder already; the others are warned about unless honoured.
    hydra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # The command line's overrides as typed, in order, as Hydra's overrides.yaml lists them: DLIO's
    # (workload=NAME, ++workload.K=V, ~workload.K; not hydra.*), then each --set K=V as ++workload.K=V.
    overrides: Tuple[str, ...] = field(default=(), compare=False, repr=False)

    # -- access ---------------------------------------------------------------------------------

    def section(self, cls: Type[_S]) -> _S:
        """A workload family's section, typed: ``cfg.section(VdbConfig).runs`` (its class in
        dlio.config.sections, generated from the family's keys)."""
        return cast(_S, self.families[_SECTION_OF[cls]])

    def top(self, name: str) -> Any:
        """A top-level section by name, a workload family's included."""
        return self.families[name] if name in _FAMILY_TOP else getattr(self, name)

    def get(self, dotted: str) -> Any:
        """Value of a dotted key (current or legacy spelling), e.g. ``cfg.get("reader.batch_size")``."""
        first, *rest = [SECTION_ALIASES.get(p, p) for p in LEGACY.get(dotted, dotted).split(".")]
        if first not in _FAMILY_TOP and not hasattr(self, first):
            raise KeyError(dotted)
        obj: Any = self.top(first)
        for part in rest:
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
                out[sec] = conv(self.top(sec))
        return out

    def to_yaml(self, sections: Optional[Sequence[str]] = None) -> str:
        """The resolved config as YAML: every section, or only `sections` (those a run reads)."""
        d = self.to_dict()
        if sections is not None:
            d = {k: v for k, v in d.items() if k in sections}
        return yaml.safe_dump(d, sort_keys=False, default_flow_style=False)

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
        train.total_training_steps when > 0 (DLIO's per-epoch cap, docs/dlio-facts.md §3.7)."""
        comm_size = _check_comm(comm_size)
        n = self.dataset.num_files_train * self.dataset.num_samples_per_file // (self.reader.batch_size * comm_size)
        cap = self.train.total_training_steps
        return min(n, cap) if cap > 0 else n

    def eval_steps_per_epoch(self, comm_size: int = 1) -> int:
        """Evaluation steps per rank: floor(eval files * spf / (batch_size_eval * ranks))."""
        comm_size = _check_comm(comm_size)
        return (
            self.dataset.num_files_eval * self.dataset.num_samples_per_file // (self.reader.batch_size_eval * comm_size)
        )


def _check_comm(comm_size: Any) -> int:
    if isinstance(comm_size, bool) or not isinstance(comm_size, (int, np.integer)) or comm_size < 1:
        raise ConfigError(f"comm_size = {show(comm_size)}: expected an integer >= 1", "comm_size", comm_size)
    return int(comm_size)


def _build(values: Dict[str, Any]) -> Dict[str, Any]:
    built: Dict[str, Any] = {}
    for sec in sorted(SECTIONS, key=lambda s: -s.count(".")):
        if sec in OPTIONAL_SECTIONS and values.get(sec) is not PRESENT:
            built[sec] = None
            continue
        kw = {}
        for f in dataclasses.fields(CLASSES[sec]):
            path = f"{sec}.{f.name}"  # the field's row, or its child section (built before it)
            kw[f.name] = built[path] if path in built else values[path]
        built[sec] = CLASSES[sec](**kw)
    return built


# --------------------------------------------------------------------------------------------------
# loading


def _resolve(
    layers: Sequence[Layer], scale: Any, scale_origin: str, workload: Optional[str], config_file: Optional[str]
) -> Config:
    merged: Dict[str, Entry] = {}
    unknown: Dict[str, Entry] = {}  # keys DLIO does not know, from files: warned about, then ignored
    hydra: Dict[str, Entry] = {}
    for layer in layers:
        for canon, e in layer.entries.items():
            if e.value is RESET:
                gone = [k for k in unknown if k == canon or k.startswith(canon + ".")]
                if not (canon in KEYS_BY_PATH or canon in SECTIONS or canon == "framework" or gone):
                    raise ConfigError(
                        f"{e.spelled}: nothing to delete: not a DLIO key and no file sets it; {suggest(canon)} "
                        f"(from {e.origin})",
                        canon,
                        None,
                        e.origin,
                    )
                for gone_key in gone:
                    del unknown[gone_key]
                for gone_key in [n for n in merged if n == canon or n.startswith(canon + ".")]:
                    del merged[gone_key]
            elif isinstance(e.value, Partial):
                base = merged.get(canon)
                bv = base.value if base is not None else None
                if isinstance(bv, Mapping):
                    d = dict(bv)
                elif bv is None:
                    d = {}
                else:
                    d = {"mean": bv}
                d.update(e.value)
                merged[canon] = Entry(d, e.origin, e.spelled)
            else:
                merged[canon] = e
        unknown.update(layer.unknown)
        hydra.update(layer.hydra)

    warnings = [unknown_key_warning(e.spelled, canon, e.origin) for canon, e in unknown.items()]
    run_dir = hydra.get(HYDRA_RUN_DIR)
    if run_dir is not None:
        if not isinstance(run_dir.value, str) or not run_dir.value.strip() or "${" in run_dir.value:
            raise problem(
                HYDRA_RUN_DIR,
                run_dir.value,
                run_dir.origin,
                "expected a plain path (dlio-fast does not resolve Hydra's ${...} interpolations)",
            )
        if "output.folder" not in merged:  # DLIO: output.folder, else Hydra's run dir
            merged["output.folder"] = Entry(run_dir.value.strip(), run_dir.origin, HYDRA_RUN_DIR)
    subdir = hydra.get(HYDRA_OUTPUT_SUBDIR)  # None (null) writes no Hydra files
    if subdir is not None and subdir.value is not None:
        v = subdir.value
        if not isinstance(v, str) or v.startswith("/") or any(p in ("", "..") for p in v.split("/")):
            raise problem(
                HYDRA_OUTPUT_SUBDIR,
                v,
                subdir.origin,
                "expected a folder name inside the output folder (e.g. .hydra or configs), or null for none",
            )
    warnings += [hydra_warning(e.spelled, e.origin) for k, e in hydra.items() if k not in HYDRA_HONOURED]

    values: Dict[str, Any] = {}
    sources: Dict[str, str] = {}
    _resolve_dialect(merged)
    for k in KEYS:
        given = merged.get(k.path)
        if given is not None and k.type != "time":
            sources[k.path] = given.origin
        e = given if given is not None else Entry(k.default, "default", k.path)
        if k.type != "time":
            values[k.path] = coerce(k, e)
    for k in KEYS:  # times last: they fold in their *_stdev sibling
        if k.type == "time":
            e = merged.get(k.path) or Entry(None, "default", k.path)
            sib = merged.get(k.path + "_stdev")
            origin = e.origin if sib is None or e.origin == sib.origin else f"{e.origin} and {sib.origin}"
            values[k.path] = parse_time(e.value, values[k.path + "_stdev"], k.path, origin)
            if k.path in merged or sib is not None:
                sources[k.path] = origin
    for sec in OPTIONAL_SECTIONS:
        if sec in merged:
            values[sec] = PRESENT
            sources[sec] = merged[sec].origin

    for path in ("dataset.data_folder", "checkpoint.checkpoint_folder"):
        values[path] = values[path].rstrip("/") or values[path][:1]
        if not values[path]:
            raise problem(path, "", sources.get(path, "default"), "expected a non-empty path")
    for path in ("dataset.record_element_type", "reader.transformed_record_element_type"):
        name = dtype_name(values[path])
        if name is None:
            raise problem(
                path,
                values[path],
                sources.get(path, "default"),
                "expected a numeric numpy dtype (uint8, int32, float16, float32, ...)",
            )
        values[path] = name

    factor = 1.0
    if scale is not None:
        if isinstance(scale, str):
            scale = parse_value(scale, "scale", scale_origin)
        if not is_number(scale) or not math.isfinite(scale) or scale <= 0:
            raise problem("scale", scale, scale_origin, "expected a number > 0 (1 keeps the dataset as configured)")
        factor = float(scale)
        refused = scale_refused(values) if factor != 1.0 else None
        if refused:
            raise problem("scale", scale, scale_origin, refused)
        if factor != 1.0:
            apply_scale(values, sources, factor, f"{scale_origin} {plain_number(factor)}")

    follow_data_folder(values, sources)
    check_all(values, {k.path: sources.get(k.path, "default") for k in KEYS} | sources)
    warnings += not_emulated(values, sources)
    built = _build(values)
    return Config(
        framework=values["framework"],
        **{s: built[s] for s in _TOP if s not in _FAMILY_TOP},
        families=MappingProxyType({s: built[s] for s in FAMILY_SECTIONS}),
        workload=workload,
        config_file=config_file,
        scale=factor,
        sources=MappingProxyType(dict(sources)),
        warnings=tuple(warnings),
        hydra=MappingProxyType({k: e.value for k, e in hydra.items()}),
    )


def _resolve_dialect(merged: Dict[str, Entry]) -> None:
    """Turn `dlio_fast.dialect: auto` (or no value) into the DLIO version the config was written for."""
    given = merged.get("dlio_fast.dialect")
    if given is not None and str(given.value).strip().lower() != "auto":
        return
    legacy = sorted(
        e.spelled
        for e in merged.values()
        if e.spelled.removeprefix("workload.") in LEGACY_ONLY or e.spelled.removeprefix("workload.") == "model"
    )
    if legacy:
        merged["dlio_fast.dialect"] = Entry("2.0.0", f"auto: {legacy[0]} is DLIO 2.0.0's spelling", "dlio_fast.dialect")
    else:
        merged["dlio_fast.dialect"] = Entry("current", "auto: no DLIO 2.0.0 spelling", "dlio_fast.dialect")


def _workload_layer(name: str) -> Layer:
    try:
        real = _resolve_workload(name)
    except ConfigError as e:
        raise ConfigError(str(e), "workload", name, "workload name") from None
    label = f"workload {name}" if real == name else f"workload {name} ({real})"
    return file_layer(workload_text(real), label, label)


def load_config(
    workload: Optional[str] = None,
    config_file: Optional[str] = None,
    sets: Iterable[str] = (),
    dlio_overrides: Iterable[str] = (),
    env: Optional[Mapping[str, str]] = None,
    scale: Optional[float] = None,
    options: Optional[Mapping[str, Tuple[Any, str]]] = None,
) -> Config:
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
    cli = Layer("command line", conflicts=False)
    file_names = None
    typed: List[str] = []
    for text in tuple(dlio_overrides):
        parsed = parse_override(text, dlio=True)
        if parsed is None:
            continue
        key, value, raw = parsed
        if not key.startswith("hydra."):
            typed.append(text.strip())
        if key == "workload":
            if workload is not None and workload != value:
                raise ConfigError(
                    f"workload = {value!r} (from override {text}) conflicts with workload = "
                    f"{workload!r} given separately; give one",
                    "workload",
                    value,
                    f"override {text}",
                )
            if config_file is not None and workload is None:
                _check_names_the_file(value, os.fspath(config_file), text)
                file_names = value  # DLIO's `--config-dir DIR workload=NAME`: the file is the workload
                continue
            workload = value
            continue
        add_dotted(cli, key, value, raw, f"override {text}")
    for key, (value, origin) in (options or {}).items():
        add_dotted(cli, key, value, None, origin)
    if isinstance(sets, str):
        sets = (sets,)
    for text in tuple(sets):
        key, value, raw = parse_override(text, dlio=False)  # type: ignore[misc]
        add_dotted(cli, key, value, raw, f"--set {text}")
        typed.append(f"++workload.{text.strip()}")

    layers = []
    if workload is not None:
        layers.append(_workload_layer(workload))
    if config_file is not None:
        path = os.fspath(config_file)
        try:
            text = read_regular(path, YAML_CAP, "workload (YAML) file").decode("utf-8")
        except DlioError as e:
            raise ConfigError(str(e), origin=path) from None
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: not a text (UTF-8) file", origin=path) from None
        layers.append(file_layer(text, path, path))
    layers.append(env_layer(env))
    layers.append(cli)

    scale_origin = "scale argument"
    scale_given: Any = scale  # a number, or the environment's text
    if scale is None and ENV_SCALE in env:
        scale_given, scale_origin = env[ENV_SCALE], f"env {ENV_SCALE}"
    label = workload if file_names is None else file_names
    cfg = _resolve(layers, scale_given, scale_origin, label, None if config_file is None else os.fspath(config_file))
    return dataclasses.replace(cfg, overrides=tuple(typed))


def _check_names_the_file(name: str, path: str, text: str) -> None:
    """`workload=NAME` next to `--config FILE`: DLIO loads one file per workload=NAME (NAME.yaml in its
    --config-dir), so the two agree only when FILE is NAME.yaml; anything else is two workloads."""
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem != name:
        raise ConfigError(
            f"override {text} and --config {path} name two workloads (DLIO loads NAME.yaml for workload=NAME); "
            f"give one, or --workload {name} --config {path} to lay the file over the built-in {name}",
            "workload",
            name,
            f"override {text}",
        )


def from_dict(tree: Any, source: str = "<dict>", sets: Iterable[str] = (), scale: Optional[float] = None) -> Config:
    """A Config from already-parsed workload data (the content of a workload YAML), no environment."""
    layer = Layer(source, conflicts=True, lenient=True)
    if tree is None:
        raise ConfigError(f"{source}: empty workload file", origin=source)
    if isinstance(tree, Mapping) and len(tree) == 1 and "workload" in tree:
        tree = tree["workload"]
    layer.add_tree(tree, "", "", lambda _w: source)
    cli = Layer("command line", conflicts=False)
    for text in (sets,) if isinstance(sets, str) else tuple(sets):
        key, value, raw = parse_override(text)  # type: ignore[misc]
        add_dotted(cli, key, value, raw, f"--set {text}")
    return _resolve([layer, cli], scale, "scale argument", None, None)
