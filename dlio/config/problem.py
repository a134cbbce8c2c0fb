"""How a bad configuration value is described: the key, the value as typed, what is wrong, and
where the value came from (a file and line, --set, an environment variable)."""

from typing import Any

from dlio.base.errors import ConfigError


def show(value: Any, limit: int = 80) -> str:
    """The value as the user would recognise it, on one line, at most `limit` characters."""
    if hasattr(value, "to_yaml"):  # a TimeSpec
        value = value.to_yaml()
    if isinstance(value, tuple):
        value = list(value)
    s = repr(value).replace("\n", "\\n").replace("\r", "\\r")
    return s if len(s) <= limit else s[: limit - 3] + "..."


def problem(key: str, value: Any, origin: str, what: str) -> ConfigError:
    """The ConfigError for `key = value` (from `origin`): `what` says what is wrong and what is allowed."""
    return ConfigError(f"{key} = {show(value)}: {what} (from {origin})", key, value, origin)
