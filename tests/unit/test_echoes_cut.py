"""
Every value a host data refusal echoes is cut after SHOWN_MAX characters, in one place
(fail(): the key's name, and any run without a space in the problem and the fix), whatever
the caller quoted: a long api_key_file, an unknown key's name, a preload_images key,
source.ref, model_repo (issue 44: these were echoed whole, 10-20 KB on one line).
"""

from __future__ import annotations

import pytest

from beekeeper.core.config import load_host_config
from beekeeper.core.errors import PATH_SHOWN_MAX, SHOWN_MAX, ConfigError
from beekeeper.core.hostdata import fail

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


def test_a_5000_character_value_in_every_key_is_cut_to_a_short_line():
    """The recorded battery's 5,000-character values (tests/unit/host_data_cases.py: LONG, of
    each shape, in every key of each base, every services entry key and an unknown key):
    every refusal is one line of at most LINE_MAX characters that names its key."""
    from beekeeper.core.errors import LINE_MAX

    from . import host_data_cases as battery

    first = len(battery.VALUES) - len(battery.LONG)
    long_cases = [(name, data) for name, data in battery.cases()
                  if int(name.rsplit("=", 1)[1]) >= first]
    assert len(long_cases) > 800
    refused, over = 0, []
    for name, data in long_cases:
        try:
            load_host_config(data)
        except ConfigError as e:
            line, refused = str(e), refused + 1
            if len(line) > LINE_MAX or "\n" in line or not line.startswith("host data `"):
                over.append((name, len(line), line[:160]))
    assert refused > 700 and not over, over[:5]


def test_every_refusal_is_cut_by_its_error_whoever_wrote_it():
    """ConfigError and PreflightError cut their own line (errors.refusal_line): a run without
    a space or a marked echo (spaces and all) past PATH_SHOWN_MAX, shorter where the line
    would be longer than LINE_MAX; a path of a usual depth in a short line stays whole."""
    from beekeeper.core.errors import LINE_MAX, PreflightError, echo

    for error in (ConfigError, PreflightError):
        line = str(error("host data `x`", f"{'y' * 5000} and {echo('a b ' * 2000)}",
                         f"chmod 600 {echo('/srv/' + 'z' * 5000)}"))
        assert len(line) <= LINE_MAX and "(5000 characters)" in line, line
        assert "(8000 characters)" in line and "\ue000" not in line, line
        path = "/srv/keys/" + "k" * 150
        assert path in str(error("host data `x`", f"{echo(path)} is readable by others",
                                 f"chmod 600 {echo(path)}"))


def test_the_refusal_line_cuts_at_its_limits_and_not_before():
    """cut() keeps a text of exactly its limit; refusal_line() keeps an echo of
    PATH_SHOWN_MAX whole, cuts a longer one after PATH_SHOWN_MAX, and only where the line is
    still longer than LINE_MAX cuts those long echoes after SHOWN_MAX, a shorter echo beside
    them staying whole (found by mutating core/errors.py: these limits were not checked)."""
    from beekeeper.core.errors import LINE_MAX, cut, echo, refusal_line

    assert cut("x" * SHOWN_MAX) == "x" * SHOWN_MAX
    assert refusal_line(echo("p" * PATH_SHOWN_MAX)) == "p" * PATH_SHOWN_MAX
    long_path = "p" * 300
    at_path_max = "p" * (PATH_SHOWN_MAX - 20) + "... (300 characters)"
    assert refusal_line(echo(long_path)) == at_path_max
    filler = "a " * ((LINE_MAX - len(at_path_max)) // 2)  # the line exactly LINE_MAX long
    assert refusal_line(echo(long_path) + filler) == at_path_max + filler
    line = refusal_line(f"{echo('q' * 100)} {echo(long_path)} {filler}")
    assert line.startswith("q" * 100 + " " + "p" * (SHOWN_MAX - 20) + "... (300 characters)")
