"""Every rank must run the same resolved config: a rank with another batch size or data folder
would wait in a collective the others never call. A hash is compared at the start; when they
differ the ranks' configs are gathered once and the differing keys named."""

import hashlib
from typing import Any, Dict

from dlio.base.errors import ConfigError
from dlio.config import Config


def _flat(tree: Any, prefix: str = "") -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    if isinstance(tree, dict):
        for k, v in tree.items():
            out.update(_flat(v, f"{prefix}{k}."))
    else:
        out[prefix.rstrip(".")] = tree
    return out


def check_same_config(cfg: Config, comm: Any) -> None:
    """Collective: ConfigError on every rank when the ranks' resolved configs differ."""
    if comm.size <= 1:
        return
    text = cfg.to_yaml()
    digests = comm.allgather(hashlib.sha256(text.encode()).hexdigest())
    if len(set(digests)) == 1:
        return
    flats = comm.allgather(_flat(cfg.to_dict()))
    keys = sorted({k for f in flats for k in f if any(g.get(k) != f.get(k) for g in flats)})
    key = keys[0] if keys else "?"
    values: Dict[str, list] = {}
    for r, f in enumerate(flats):
        values.setdefault(repr(f.get(key)), []).append(r)
    said = "; ".join(f"{v} on rank(s) {','.join(map(str, rs))}" for v, rs in values.items())
    more = f" (and {len(keys) - 1} more key(s): {', '.join(keys[1:4])})" if len(keys) > 1 else ""
    raise ConfigError(
        f"the ranks were given different configs: {key} is {said}{more}; give every rank "
        "the same workload, --set options and environment",
        key=key,
    )
