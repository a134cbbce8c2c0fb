"""Where the DLIO installs for interchange tests are (tools/install-dlio.sh makes them); skip when absent."""

import os
import shutil

import pytest

_DEFAULTS = {
    "2.0.0": ("DLIO_200_PYTHON", "/tmp/dlio-venv/bin/python"),
    "current": ("DLIO_CURRENT_PYTHON", "/tmp/dlio-cur-venv/bin/python"),
}


def dlio_python(version: str):
    """The python of a venv with DLIO `version` installed, or None."""
    env, default = _DEFAULTS[version]
    path = os.environ.get(env) or default
    return path if shutil.which(path) else None


def needs_dlio(version: str):
    return pytest.mark.skipif(
        dlio_python(version) is None, reason=f"DLIO {version} not installed (tools/install-dlio.sh installs it)"
    )
