"""Inputs of `dlio-fast report`, loaded and checked: a *source* is one of
  - a run folder (holds dlio-fast.json, schema dlio-fast.run/1; summary.json is read when present),
    or that dlio-fast.json file itself; a DLIO output folder (summary.json, no dlio-fast.json);
  - a `dlio-fast io --json` file (schema dlio-fast.io/1: a list of points);
  - a `dlio-fast ceiling --json` file (schema dlio-fast.ceiling/1: the best point per target);
  - a workload family's run folder or dlio-fast.json (model load, KV cache, vector search), read through
    the FamilyReport the caller passes for its schema (dlio.report.family).
Anything else is a one-line DlioError naming the path.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, cast

from dlio.base import inputs
from dlio.base.errors import DlioError
from dlio.report import exact, validate
from dlio.report.dlio import files as dlio_files
from dlio.report.dlio import folder as dlio_folder
from dlio.report.family import FamilyReading, FamilyReport
from dlio.report.result import CEILING_SCHEMA, IO_SCHEMA, RUN_SCHEMA, RunResult


class Source:
    """One loaded input. kind: 'run', 'io', 'ceiling' or 'family'. For runs, doc is the dlio-fast.json
    document (the Result plus 'metrics') and summary is DLIO's summary.json; a family's run carries its
    FamilyReport and what it read from the document."""

    def __init__(
        self,
        kind: str,
        path: str,
        doc: Dict[str, Any],
        summary: Optional[Dict[str, Any]] = None,
        family: Optional[FamilyReport] = None,
        reading: Optional[FamilyReading] = None,
    ) -> None:
        self.kind = kind
        self.path = path
        self.doc = doc  # a JSON document as read (validate.check_run has checked a run's against RunResult)
        self.summary = summary
        self.family: Optional[FamilyReport] = family
        self.reading: Optional[FamilyReading] = reading
        self.label = _default_label(path)

    def family_parts(self) -> Tuple[FamilyReport, FamilyReading]:
        """A family's run: its FamilyReport and what it read from the document."""
        assert self.family is not None and self.reading is not None, f"{self.path}: not a family's run"
        return self.family, self.reading

    def __repr__(self) -> str:
        return f"Source({self.kind}, {self.path!r})"


def _default_label(path: str) -> str:
    p = os.path.abspath(path).rstrip(os.sep)
    base = os.path.basename(p)
    if base == "dlio-fast.json":
        base = os.path.basename(os.path.dirname(p))
    elif base.endswith(".json"):
        base = base[:-5]
    return base or p


def _read_json(path: str, what: str) -> Any:
    try:
        return validate.loads(inputs.read_regular(path, inputs.JSON_CAP, f"{what} JSON file"), path, what)
    except FileNotFoundError:
        raise DlioError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DlioError(f"{path}: is a folder, expected a JSON file") from None
    except PermissionError:
        raise DlioError(f"{path}: not readable (permission denied)") from None


def load(path: Any, families: Optional[Mapping[str, FamilyReport]] = None) -> Source:
    """A run folder, its dlio-fast.json, or an io / ceiling JSON file -> Source (DlioError if not);
    families: {schema: FamilyReport} of the workload families' documents this caller reads."""
    path = str(path)
    families = families or {}
    summary: Optional[Dict[str, Any]]
    if not os.path.exists(path):
        raise DlioError(f"{path}: no such run folder or result file")
    if dlio_folder.is_dlio_folder(path):
        doc, summary = dlio_folder.load_dlio_folder(path)
        doc["dlio_summary"] = summary
        return Source("run", path, doc, summary)
    if os.path.isdir(path):
        doc_path = os.path.join(path, "dlio-fast.json")
        if not os.path.lexists(doc_path):  # something else at the name (a FIFO) is read, and refused, below
            raise DlioError(
                f"{path}: neither a dlio-fast run folder (no dlio-fast.json) nor a DLIO output folder (no summary.json)"
            )
        folder = path
    else:
        doc_path = path
        folder = os.path.dirname(os.path.abspath(path))
    doc = _read_json(doc_path, "dlio-fast")
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if schema == RUN_SCHEMA:
        validate.check_run(doc, doc_path)
        run = cast(RunResult, doc)  # checked against RunResult just above
        summary = None
        sp = os.path.join(folder, "summary.json")
        if os.path.isfile(sp):
            summary = _read_json(sp, "summary")
        if summary is None or not isinstance(summary.get("metric"), dict):
            summary = _compute_summary(run, doc_path)
        if not isinstance(doc.get("metrics"), dict):
            doc = dict(doc)
            doc["metrics"] = _compute_exact(run, doc_path)
        cfg = _read_config(os.path.join(folder, "config.yaml"))
        if cfg is not None and "config" not in doc:  # the resolved config, for `check` (Rules 3.6.2)
            doc = dict(doc, config=cfg)
        return Source("run", path, doc, summary)
    if schema == IO_SCHEMA:
        if not isinstance(doc.get("points"), list):
            raise DlioError(f"{doc_path}: io document without a points list")
        validate.check_points(doc["points"], doc_path)
        return Source("io", path, doc)
    if schema == CEILING_SCHEMA:
        if not isinstance(doc.get("best"), dict):
            raise DlioError(f"{doc_path}: ceiling document without a best section")
        validate.check_points(list(doc["best"].values()), doc_path, "best")
        return Source("ceiling", path, doc)
    if isinstance(schema, str) and schema in families:
        fam = families[schema]
        try:
            reading = fam.read(doc)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise DlioError(f"{doc_path}: a {fam.title} result this version cannot read (at {e})") from None
        return Source("family", path, doc, family=fam, reading=reading)
    known = ", ".join([RUN_SCHEMA, IO_SCHEMA, CEILING_SCHEMA, *families])
    raise DlioError(f"{doc_path}: unknown schema {schema!r} (expected one of {known})")


def _read_config(path: str) -> Optional[Dict[str, Any]]:
    """The run folder's config.yaml (the resolved config the run wrote), or None without one."""
    if not os.path.isfile(path):
        return None
    tree = inputs.loads_yaml(inputs.read_regular(path, inputs.YAML_CAP, "config YAML file"), path, "config YAML file")
    return tree if isinstance(tree, dict) else None


def _compute_summary(doc: RunResult, where: str) -> Dict[str, Any]:
    try:
        return dlio_files.summary(doc)
    except (KeyError, TypeError, ValueError) as e:
        raise DlioError(f"{where}: cannot compute the summary from this run document (missing {e})") from None


def _compute_exact(doc: RunResult, where: str) -> Dict[str, Any]:
    try:
        return exact.exact(doc)
    except (KeyError, TypeError, ValueError) as e:
        raise DlioError(f"{where}: cannot compute the figures from this run document (missing {e})") from None


def load_all(paths: Iterable[Any], families: Optional[Mapping[str, FamilyReport]] = None) -> List[Source]:
    """Sources for paths, labels made unique (a folder name seen twice gets its parent's too)."""
    srcs = [load(p, families) for p in paths]
    seen: Dict[str, Source] = {}
    for s in srcs:
        if s.label in seen:
            parent = os.path.basename(os.path.dirname(os.path.abspath(s.path).rstrip(os.sep)))
            cand = f"{parent}/{s.label}" if parent else s.label
            n = 2
            base = cand
            while cand in seen:
                cand = f"{base}#{n}"
                n += 1
            s.label = cand
        seen[s.label] = s
    return srcs
