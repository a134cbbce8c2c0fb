"""What a workload family is to the rest of dlio-fast: a table of hooks, as fio's ioengine_ops or IOR's
aiori are to their loops. The driver (dlio.jobs.driver) takes a family's Run through one lifecycle; the
command line asks the family for its `workloads` columns, `report` for how to read its documents, and
`check` for its rules' checks."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple

from dlio.base import inputs
from dlio.base.errors import DlioError
from dlio.config import Config
from dlio.report import validate
from dlio.report.family import FamilyReport
from dlio.storage.base import Backend
from dlio.storage.places import Place
from dlio.system.mpi import Comm

Echo = Callable[[str], None]


@dataclass
class RunContext:
    """What every hook of one run shares: the config, the ranks, the console (rank 0 prints) and the
    storage backend, made once per run."""

    cfg: Config  # dlio.config.Config
    comm: Comm
    echo: Echo
    warn: Echo
    backend: Backend
    progress: Any = None  # dlio.progress's console, or None
    output: Optional[str] = None  # --output as given (dlio.jobs.driver.output_folder decides the folder)
    verbose: bool = False


class Run(Protocol):
    """One run of a family on this rank, its config checked and its plan made (Family.plan). The driver
    calls, in order: describe (--dry-run stops here), check (every rank), check_access (rank 0),
    places (every rank: the folders it writes, claimed by dlio.jobs.places before the output folder is
    made), prepare (every rank, once the output folder exists), measure (stop signals deferred), then
    keep_partial (each rank, when a rank failed in a multi-rank job) or nothing_measured and write (rank 0,
    with every rank's records)."""

    def describe(self) -> List[str]:
        """The plan in words: what --dry-run prints after the config."""
        ...

    def check(self) -> None:
        """Every rank, once --dry-run has stopped: what this host or the rules cannot honour (memory for
        the buffers, the queue depth, MLPerf's dataset size), refused before any folder exists. Collective;
        a DlioError refuses the run. A plan (and so --dry-run) makes no request and reads no limit."""
        ...

    def check_access(self) -> None:
        """Rank 0: one cheap request to each place the run will use (DlioError when one is refused)."""
        ...

    def places(self) -> List[Place]:
        """This rank's folders (or object prefixes) the run writes besides the output folder, with the
        names it makes there: the driver claims each (a real filesystem, locked for the run, no link where
        the run makes a folder, no files of those names the run did not make) before anything is written."""
        ...

    def prepare(self, folder: str) -> None:
        """Every rank, once the output folder exists: what must be in place before measuring (a dataset
        generated, a cache folder claimed, the plan printed). Collective; DlioError refuses the run."""
        ...

    def measure(self) -> Tuple[Any, Optional[BaseException]]:
        """This rank's records, and the failure or stop signal that ended the measuring (None: done)."""
        ...

    def keep_partial(self, folder: str, records: Any, failure: BaseException) -> None:
        """This rank's records in files of its own: another rank failed, so nothing is gathered."""
        ...

    def nothing_measured(self, records: List[Any]) -> Optional[str]:
        """Rank 0, every rank's records of a run that ended without a failure: why it measured nothing
        (no request, read, load or step completed), else None. A run that measured nothing is no result:
        the driver makes it a failure, so its files say so (incomplete, with this reason) and it exits 1."""
        ...

    # Optional: so_far() -> this rank's records measured so far, read from another thread while measure() runs
    # (a host lost mid-run: dlio.jobs.driver keeps them with keep_partial). Families without it keep none then.

    def write(
        self, folder: str, records: List[Any], failure: Optional[BaseException]
    ) -> Optional[Tuple[Dict[str, Any], str]]:
        """Rank 0: the run's result files from every rank's records, its figures printed; returns the
        dlio-fast.json document and the folder it went to (another one when the output folder could not
        take it). Raises DlioRunError when the results could not be written."""
        ...


Check = Tuple[str, Optional[bool], str]  # (name, passed: None for a note, the figure or reason)


@dataclass(frozen=True)
class FamilyChecks:
    """`dlio-fast check` of a family's runs: a run folder is one of this family's when its dlio-fast.json
    has the family's schema; checks(doc) are its (name, passed, figure) tuples, passed None for a note."""

    schema: str
    checks: Callable[[Dict[str, Any]], List[Check]]

    def load(self, path: str) -> Optional[Dict[str, Any]]:
        """The dlio-fast.json of one of this family's run folders, or None when path is not one (no such
        file, or another schema). A file of this family's that is no valid document (NaN, nested a thousand
        deep, not JSON) is a DlioError naming it."""
        where = os.path.join(path, "dlio-fast.json")
        # bounded and regular files only: a FIFO or a huge file at the name is refused in one line
        text = inputs.read_if_there(where, inputs.JSON_CAP, "dlio-fast.json")
        if text is None:
            return None
        if f'"{self.schema}"'.encode() not in text:
            return None  # another family's, or not ours at all
        doc = validate.loads(text, where, self.schema)
        return doc if isinstance(doc, dict) and doc.get("schema") == self.schema else None

    def main(self, paths: Sequence[str], echo: Echo) -> int:
        """Print the checks of each run folder as PASS / FAIL / NOTE lines; 1 if any failed."""
        failed = 0
        for p in paths:
            doc = self.load(p)
            assert doc is not None, p  # `check` gives a family only folders its load() took
            if len(paths) > 1:
                echo(f"{p}:")
            try:  # a document cut short or edited by hand: one line, not a KeyError's traceback
                rows = self.checks(doc)
            except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
                raise DlioError(f"{p}/dlio-fast.json: not a complete {self.schema} document ({e!r})") from None
            for name, ok, text in rows:
                echo(f"{'NOTE' if ok is None else 'PASS' if ok else 'FAIL'}  {name}: {text}")
                failed += ok is False
        echo(f"checks: {'all passed' if not failed else f'{failed} failed'}")
        return 1 if failed else 0


@dataclass(frozen=True)
class Family:
    """A workload family: its workflow flag (``name``; "train" for training and checkpoints), how a run
    is planned, its columns in `dlio-fast workloads`, how `report` reads its documents (None: training's
    own Result, read by dlio.report directly) and its `check` (None: MLPerf's training rules)."""

    name: str
    title: str
    plan: Callable[[RunContext], Run]
    listing: Callable[[Any], Dict[str, str]]
    report: Optional[FamilyReport] = None
    checks: Optional[FamilyChecks] = None
    # the config sections its runs read: --dry-run prints these (None: every section)
    sections: Optional[Tuple[str, ...]] = None
