"""DLIO's times (computation_time, eval_time, preprocess_time): every spelling -> one TimeSpec.

A scalar, {mean[, stdev]} (normal), a `*_stdev` sibling key, or {type: normal|uniform|gamma|
exponential|poisson, ...}. TimeSpec.draw(rng, n) draws n values at once (numpy); like DLIO, the
absolute value of each draw is taken (a normal draw below zero is folded, not clipped).
"""

import difflib
import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Dict, Mapping

import numpy as np

from dlio.config import schema
from dlio.config.problem import problem

_TIME_PARAMS = {
    "constant": ("mean",),
    "normal": ("mean", "stdev"),
    "uniform": ("min", "max"),
    "gamma": ("shape", "scale"),
    "exponential": ("scale",),
    "poisson": ("lam",),
}
_TIME_KEYS = ("type", "mean", "stdev", "min", "max", "shape", "scale", "lam")


@dataclass(frozen=True)
class TimeSpec:
    """A per-step (or per-sample) time in seconds, as DLIO's ``computation_time`` and friends.

    ``kind`` is constant, normal, uniform, gamma, exponential or poisson; ``params`` maps the names DLIO
    uses (mean, stdev, min, max, shape, scale, lam) to floats.  Like DLIO (``utils/utility.py:sleep``)
    every draw is folded with ``abs()``, so a normal with a mean close to zero draws a folded normal;
    ``mean()`` is the mean of what ``draw`` returns.
    """

    kind: str = "constant"
    params: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({"mean": 0.0}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType({k: float(v) for k, v in dict(self.params).items()}))

    def __hash__(self) -> int:
        return hash((self.kind, tuple(sorted(self.params.items()))))

    def __repr__(self) -> str:
        return f"TimeSpec({self.kind!r}, {dict(self.params)!r})"

    def __getitem__(self, name: str) -> float:
        return self.params[name]

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` draws in seconds, float64, vectorised, abs() applied (DLIO does the same)."""
        p = self.params
        k = self.kind
        if k == "constant":
            out = np.full(n, p["mean"], dtype=np.float64)
        elif k == "normal":
            out = rng.normal(p["mean"], p["stdev"], n)
        elif k == "uniform":
            out = rng.uniform(p["min"], p["max"], n)
        elif k == "gamma":
            out = rng.gamma(p["shape"], p["scale"], n)
        elif k == "exponential":
            out = rng.exponential(p["scale"], n)
        elif k == "poisson":
            out = rng.poisson(p["lam"], n).astype(np.float64)
        else:  # pragma: no cover - parse_time only builds the kinds above
            raise ValueError(f"unknown time distribution {k!r}")
        return np.abs(out, out=out)

    def mean(self) -> float:
        """Expected value of a draw (folded normal for ``normal``)."""
        p = self.params
        k = self.kind
        if k == "constant":
            return abs(p["mean"])
        if k == "normal":
            m, s = p["mean"], p["stdev"]
            if s == 0:
                return abs(m)
            return s * math.sqrt(2 / math.pi) * math.exp(-m * m / (2 * s * s)) + m * math.erf(m / (s * math.sqrt(2)))
        if k == "uniform":
            return (p["min"] + p["max"]) / 2
        if k == "gamma":
            return p["shape"] * p["scale"]
        if k == "exponential":
            return p["scale"]
        return p["lam"]

    def std(self) -> float:
        """Standard deviation of the distribution before folding."""
        p = self.params
        return {
            "constant": lambda: 0.0,
            "normal": lambda: p["stdev"],
            "uniform": lambda: (p["max"] - p["min"]) / math.sqrt(12),
            "gamma": lambda: math.sqrt(p["shape"]) * p["scale"],
            "exponential": lambda: p["scale"],
            "poisson": lambda: math.sqrt(p["lam"]),
        }[self.kind]()

    @property
    def is_zero(self) -> bool:
        return self.kind == "constant" and self.params["mean"] == 0

    def to_yaml(self) -> Any:
        """DLIO's current spelling: a scalar, {mean, stdev}, or {type: ..., params}."""
        p = dict(self.params)
        if self.kind == "constant":
            return plain_number(p["mean"])
        if self.kind == "normal":
            return {"mean": plain_number(p["mean"]), "stdev": plain_number(p["stdev"])}
        return {"type": self.kind, **{k: plain_number(v) for k, v in p.items()}}


def plain_number(x: float) -> Any:
    """A whole float as an int (a value shown as typed: 2, not 2.0)."""
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else x


def is_number(v: Any) -> bool:
    """An int or a float, not a bool."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# The C core counts time in int64 nanoseconds: 1e300 s would wrap to nonsense (0 s per step).
MAX_SECONDS = 1e7


def parse_time(value: Any, stdev: Any = None, key: str = "train.computation_time", origin: str = "?") -> TimeSpec:
    """Every DLIO spelling of a time -> TimeSpec.  ``stdev`` is the ``*_stdev`` sibling key's value."""
    if value is None:
        d: Dict[str, Any] = {}
    elif is_number(value):
        d = {"mean": value}
    elif isinstance(value, Mapping):
        d = dict(value)
    else:
        raise problem(
            key,
            value,
            origin,
            "expected seconds as a number, {mean, stdev} or {type: " + "|".join(schema.TIME_TYPES) + ", ...}",
        )
    if stdev is not None:
        d["stdev"] = stdev
    for k in d:
        if k not in _TIME_KEYS:
            near = difflib.get_close_matches(str(k), _TIME_KEYS, n=1)
            hint = f"; did you mean {near[0]}?" if near else ""
            raise problem(key, value, origin, f"unknown field {k!r}{hint} (allowed: {', '.join(_TIME_KEYS)})")
    kind = d.pop("type", None)
    if kind is None:
        if "mean" not in d:
            if d:
                raise problem(key, value, origin, "a time without a type needs mean (and optionally stdev)")
            d = {"mean": 0}
        kind = "normal" if "stdev" in d else "constant"
    elif not isinstance(kind, str) or kind.strip().lower() not in schema.TIME_TYPES:
        raise problem(key, value, origin, f"type must be one of {', '.join(schema.TIME_TYPES)}")
    kind = kind.strip().lower()
    need = _TIME_PARAMS[kind]
    params = {}
    for name in need:
        if name not in d:
            raise problem(key, value, origin, f"type {kind} needs {' and '.join(need)}")
        v = d[name]
        if not is_number(v) or not math.isfinite(v):
            raise problem(key, value, origin, f"{name} must be a finite number")
        params[name] = float(v)
    for name in ("mean", "stdev", "min", "max", "lam", "scale"):
        if params.get(name, 0) < 0:
            raise problem(key, value, origin, f"{name} must be >= 0 seconds")
    if kind == "gamma" and (params["shape"] <= 0 or params["scale"] <= 0):
        raise problem(key, value, origin, "gamma needs shape > 0 and scale > 0")
    if kind == "exponential" and params["scale"] <= 0:
        raise problem(key, value, origin, "exponential needs scale > 0")
    if kind == "uniform" and params["min"] > params["max"]:
        raise problem(key, value, origin, "uniform needs min <= max")
    biggest = max((v for n, v in params.items() if n != "shape"), default=0)  # shape has no unit
    if biggest > MAX_SECONDS or params.get("shape", 0) * params.get("scale", 0) > MAX_SECONDS:
        raise problem(
            key, value, origin, f"more than {MAX_SECONDS:g} s (about 115 days) per step; a time is in seconds"
        )
    if kind == "normal" and params["stdev"] == 0:
        kind, params = "constant", {"mean": params["mean"]}
    return TimeSpec(kind, params)
