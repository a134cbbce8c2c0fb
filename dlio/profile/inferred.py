"""One inferred value with its confidence (0..1) and the evidence for it."""

from dataclasses import dataclass
from typing import Any


@dataclass
class Inferred:
    value: Any
    confidence: float
    evidence: str
