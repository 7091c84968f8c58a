"""
Every value a host data refusal echoes is cut after SHOWN_MAX characters, in one place
(fail(): the key's name, and any run without a space in the problem and the fix), whatever
the caller quoted: a long api_key_file, an unknown key's name, a preload_images key,
source.ref, model_repo (issue 44: these were echoed whole, 10-20 KB on one line).
"""

from __future__ import annotations

import pytest

from beekeeper.core.config import load_host_config
from beekeeper.core.errors import ConfigError
from beekeeper.core.hostdata import PATH_SHOWN_MAX, SHOWN_MAX, cut_words, fail

COMMIT = "a" * 40
BASE = {"profile": "cpu-tiny", "source": {"git": "https://x/y", "ref": COMMIT}}
LONG = "x" * 5000
# a refusal line's own prose, its fix and the cut values (a relative path is echoed twice,
# cut after PATH_SHOWN_MAX each) stay short: a few lines of a terminal, never kilobytes
MOST = 900


@pytest.mark.parametrize("key,data", [
    ("api_key_file", {"api_key_file": "/etc/" + LONG}),
    ("api_key_file", {"api_key_file": "/etc/" + "a b" * 2000}),
    ("api_key_file", {"api_key_file": LONG}),  # relative: echoed twice, cwd joined
    ("xxxx", {LONG: 1}),
    ("source.xxxx", {"source": {"git": "https://x/y", "ref": COMMIT, LONG: 1}}),
    ("services[0].xxxx", {"services": [{"service_name": "a", "profile": "cpu-tiny",
                                        LONG: 1}]}),
    ("preload_images[", {"preload_images": {LONG: "/srv/images/a.tar"}}),
    ("source.ref", {"source": {"git": "https://x/y", "ref": LONG}}),
    ("source.ref", {"source": {"git": "https://x/" + LONG, "ref": "main"}}),
    ("model_repo", {"model_repo": "o/" + LONG, "model_file": "a.gguf"}),
    ("model_repo", {"model_repo": LONG, "model_file": "a.gguf"}),
    ("model_revision", {"model_repo": "o/r", "model_file": "a.gguf", "model_revision": LONG}),
    ("model_file", {"model_repo": "o/r", "model_file": LONG + ".gguf"}),
])
def test_a_long_value_is_cut_in_every_refusal(key, data):
    with pytest.raises(ConfigError) as e:
        load_host_config({**BASE, **data})
    line = str(e.value)
    assert line.startswith(f"host data `{key}"), line[:200]
    assert len(line) < MOST, (len(line), line[:300])
    assert "x" * (PATH_SHOWN_MAX + 1) not in line
    assert "characters)" in line


BAD = "k" * 90 + "!"  # no key, image reference or commit


@pytest.mark.parametrize("data", [{BAD: 1}, {"preload_images": {BAD: "/a.tar"}},
                                  {"source": {"git": "https://x/y", "ref": BAD}}])
def test_a_value_or_key_name_past_shown_max_is_cut_where_it_is_quoted(data):
    with pytest.raises(ConfigError) as e:
        load_host_config({**BASE, **data})
    line = str(e.value)
    # the key's name and a quoted value are cut after SHOWN_MAX (an unquoted path after
    # PATH_SHOWN_MAX, so that a fix such as `chmod 600 PATH` stays runnable)
    assert "k" * (SHOWN_MAX + 1) not in line and "(91 characters)" in line, line


def test_fail_cuts_what_any_caller_gives_it_and_keeps_short_words():
    line = str(fail("k" * 500, f"{'v' * 900} is wrong", f"see {'f' * 300}"))
    assert len(line) < 700 and "(500 characters)" in line and "(900 characters)" in line
    assert "(300 characters)" in line and "k" * (SHOWN_MAX + 1) not in line
    prose = "use 127.0.0.1, e.g. 'unsloth/Qwen3.5-9B-GGUF' or /srv/beekeeper/models"
    assert cut_words(prose) == prose
