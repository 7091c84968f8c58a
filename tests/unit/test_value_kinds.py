"""A value of the wrong kind is named as a user reads it in the refusal ("5 is a number, not
a path"), not by Python's type name ("5 is a int")."""

from __future__ import annotations

import pytest

from beekeeper.core.config import load_host_config
from beekeeper.core.errors import ConfigError

BASE = {"profile": "cpu-tiny", "source": {"path": "/srv/src.tar.gz", "ref": "lcp0.3.36"}}


@pytest.mark.parametrize(("value", "said"), [
    (5, "5 is a number, not a path"), (2.5, "2.5 is a number, not a path"),
    (True, "True is a boolean, not a path"), (None, "None is empty, not a path"),
    ([1], "[1] is a list, not a path"), ({"x": 1}, "{'x': 1} is a dict, not a path"),
])
def test_a_value_of_the_wrong_kind_is_named_in_plain_words(value, said):
    with pytest.raises(ConfigError) as e:
        load_host_config({**BASE, "model_dir": value})
    assert e.value.subject == "host data `model_dir`" and e.value.problem == said
