"""The storage words: the config's STORAGE_TYPES are the backends plus the words refused in one place."""

import pytest

from dlio.base.errors import ConfigError
from dlio.config.schema import STORAGE_TYPES
from dlio.storage import BACKENDS, NOT_EMULATED, make


def test_the_config_words_are_the_backends_and_the_refused():
    assert not set(BACKENDS) & set(NOT_EMULATED), "a word both made and refused"
    assert set(BACKENDS) | set(NOT_EMULATED) == set(STORAGE_TYPES), (
        "dlio.config.schema.STORAGE_TYPES and dlio.storage (BACKENDS, NOT_EMULATED) disagree"
    )


@pytest.mark.parametrize("kind", sorted(NOT_EMULATED))
def test_a_refused_word_says_why(kind):
    with pytest.raises(ConfigError, match=f"storage.storage_type = '{kind}': not emulated \\(.+\\)"):
        make(kind)
