"""One configuration key: a row of the schema (``dlio.config.schema`` gathers the rows of every family).

Types:
  int, float      numbers; ``num`` keeps an int an int and a float a float (record sizes)
  bytes           an integer of bytes, also as people type sizes (300m, 16GiB: powers of 1024)
  bool, str
  enum            one of ``choices``, compared case-insensitively, normalised to the spelling here
  ints, strs      lists (``strs`` also accepts one string)
  map             a mapping (or null)
  records         a list of mappings (parquet's columns)
  time            a DLIO time distribution (scalar, {mean[, stdev]}, {type: ...}), see dlio.config.timespec.TimeSpec
  stdev           DLIO's ``*_stdev`` sibling of a time key; folded into it, not a field of its own
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, Optional, Tuple

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class Key:
    """One configuration key.  ``path`` is its current dotted name, e.g. ``dataset.num_files_train``."""

    path: str
    type: str
    default: Any
    help: str
    choices: Tuple[str, ...] = ()
    lo: Optional[float] = None  # inclusive lower bound (numbers, and each list element)
    hi: Optional[float] = None  # inclusive upper bound
    nullable: bool = False  # None (YAML null) is a valid value
    env: Optional[str] = None  # environment variable that sets it
    io: bool = False  # changes the I/O that reaches storage
    aliases: Mapping[str, str] = field(default_factory=lambda: _EMPTY)  # extra enum spellings -> canonical
    note: str = ""  # where dlio-fast deliberately differs from DLIO

    @property
    def section(self) -> str:
        return self.path.rpartition(".")[0]

    @property
    def name(self) -> str:
        return self.path.rpartition(".")[2]

    @property
    def hidden(self) -> bool:
        """Folded into another key: no attribute, not written by ``to_dict``."""
        return self.type == "stdev"
