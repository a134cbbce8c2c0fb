"""The configuration error: one line naming the key, the bad value, what is allowed and where the
value came from (a file and line, --set, an environment variable)."""
from typing import Any, Optional


class ConfigError(ValueError):
    """A bad configuration value.  ``str()`` is one line; ``key``, ``value``, ``origin`` when known."""

    def __init__(self, message: str, key: Optional[str] = None, value: Any = None, origin: Optional[str] = None):
        message = " ".join(str(message).split("\n"))
        super().__init__(message)
        self.key = key
        self.value = value
        self.origin = origin


def _show(value: Any, limit: int = 80) -> str:
    if hasattr(value, "to_yaml"):   # a TimeSpec
        value = value.to_yaml()
    if isinstance(value, tuple):
        value = list(value)
    try:
        s = repr(value)
    except Exception:  # pragma: no cover - repr of YAML data does not fail
        s = f"<{type(value).__name__}>"
    s = s.replace("\n", "\\n").replace("\r", "\\r")
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _err(key: str, value: Any, origin: str, problem: str) -> ConfigError:
    return ConfigError(f"{key} = {_show(value)}: {problem} (from {origin})", key, value, origin)
