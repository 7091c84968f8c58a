"""
Issue 33, refusals that named the wrong problem: the host-data battery
(tests/unit/host_data_cases.py) has values that break a rule other than the one their
refusal stated. Each line now states the rule the value breaks, and names the key given.
"""

from __future__ import annotations

import pytest

from beekeeper.core.config import load_host_config
from beekeeper.core.errors import ConfigError

GOOD = {"profile": "cpu-tiny", "source": {"path": "/srv/src.tar.gz", "ref": "lcp0.3.36"}}


def refusal(**over) -> str:
    with pytest.raises(ConfigError) as e:
        load_host_config({**GOOD, **over})
    assert "\n" not in str(e.value)
    return str(e.value)


@pytest.mark.parametrize(("key", "value", "rule", "wrong"), [
    # whole numbers above the range were told they were not positive / not above 0 /
    # not a number
    ("build_jobs", 8083, "8083 is not a whole number from 1 to 1024", "positive integer"),
    ("build_jobs", 0, "0 is not a whole number from 1 to 1024", "positive integer"),
    ("vram_budget_gib", 8083, "8083 is not a number of GiB above 0 and up to 4096", None),
    ("driver_branch", 65535, "65535 is not a driver branch (a whole number from 100 to 9999)",
     "give the branch as a number"),
    ("driver_branch", -1, "-1 is not a driver branch (a whole number from 100 to 9999)",
     "give the branch as a number"),
])
def test_a_number_out_of_range_is_told_the_range(key, value, rule, wrong):
    msg = refusal(**{key: value})
    assert f"host data `{key}`: {rule}; fix: e.g. {key} = " in msg
    if wrong:
        assert wrong not in msg


def test_a_preload_images_key_that_names_no_image_quotes_the_key_not_its_path():
    msg = refusal(preload_images={"a b": "/x.tar"})
    assert "host data `preload_images['a b']`: the key 'a b' is not an image reference " \
        "(each key names an image)" in msg
    assert "'/x.tar'" not in msg and "mapping of strings" not in msg
    # a path that is no path is still told so
    assert "'x' is not an absolute path" in refusal(preload_images={"debian:bookworm": "x"})


def test_a_revision_for_a_model_not_on_the_hub_names_model_revision():
    msg = refusal(model_revision="main")
    assert msg.startswith("host data `model_revision`: 'main' cannot pin the profile's model "
                          "(gemma-3-270m-q4_k_m.gguf), which is not on the Hub; fix: remove "
                          "model_revision, or serve a model from the Hub")
    # model_file without model_repo: the key it needs is still the one named
    assert refusal(model_file="m.gguf").startswith("host data `model_repo`: the profile's "
                                                   "model is not on the Hub")
