"""
A newer engine is refused, never broken silently (issue 43, point 5): the kit reads the built
server's own `--help` (facts/engine.py) and refuses, before any service changes, a profile
whose flags it does not take, in one line naming the option and a release the profile fits
(core/engine_flags.py, tasks/engine.py).

The help texts are real llama-server output, not written by hand:
- data/llama-server-help-stock-lcp0.3.36.txt: `llama-server --help` of the stock llama.cpp
  the sandbox builds (the tree the llama-cpp-python 0.3.36 sdist vendors), the kit's CPU build
  (2026-12-05);
- data/llama-server-help-beellama-ba1fdce591f5.txt: `llama-server --help` of beellama at the
  pinned commit, a CPU build of the kit's packed source with the kit's cmake flags
  (2026-12-05).
The v0.4-shaped text (below, `newer_beellama`) is the pinned one with what beellama's issues
show of v0.4: `-ctv`'s allowed values as a v0.4 server's `--help` printed them (issue #120:
q6_0 ... q2_1 and kvarn2 ... kvarn8 after q5_1, no turbo type; #145: v0.4.0 takes kvarn2-8),
`--spec-type draft-dflash` for `dflash` (#134, v0.4.3), and no `-cd` (#97: v0.4.0's `--help`
has no `--spec-draft-ctx-size`/`-cd`); no v0.4 source was at hand to build.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from beekeeper.core.engine_flags import (
    Offered,
    extra_warning,
    parse_help,
    refusal,
    unaccepted,
)
from beekeeper.core.errors import PreflightError
from beekeeper.core.profiles import BEELLAMA_REFS, PROFILES, STOCK_CPU_REFS
from beekeeper.facts.engine import ServerHelp

from .harness import DEFAULTS, facts, names, run_deploy

DATA = Path(__file__).parent / "data"
STOCK = (DATA / "llama-server-help-stock-lcp0.3.36.txt").read_text()
BEELLAMA = (DATA / "llama-server-help-beellama-ba1fdce591f5.txt").read_text()


def newer_beellama() -> str:
    """The pinned beellama's help with v0.4's renames applied (see the module's note)."""
    text = BEELLAMA.replace("turbo2, turbo3, turbo4, turbo3_tcq, turbo2_tcq",
                            "q6_0, q6_1, q3_0, q3_1, q2_0, q2_1, kvarn2, kvarn3, kvarn4, kvarn5,\n"
                            + " " * 40 + "kvarn6, kvarn8")
    text = text.replace("|dflash]", "|draft-dflash]")
    return re.sub(r"^--spec-draft-ctx-size, -cd,.*\n(?: {40}.*\n)*", "", text, flags=re.M)


def args_of(name: str) -> list[str]:
    return PROFILES[name].server.args("/models/m.gguf", "/models/d.gguf")


def refused_line(name: str, offered: Offered) -> str | None:
    p = PROFILES[name]
    said = refusal(f"profile `{name}`", "source.ref 0123456789ab", name, p.engine_refs,
                   unaccepted(args_of(name), offered))
    return None if said is None else str(said)


def offered(text: str) -> Offered:
    parsed = parse_help(text)
    assert parsed is not None
    return parsed


# ---------------------------------------------------------------- what fits, fits


@pytest.mark.parametrize("name", [n for n, p in PROFILES.items() if p.backend == "cpu"])
def test_every_cpu_profile_fits_the_stock_server_the_sandbox_builds(name):
    assert PROFILES[name].engine_refs == STOCK_CPU_REFS
    assert refused_line(name, offered(STOCK)) is None
    assert unaccepted(["--alias", "x", "--metrics"], offered(STOCK)) == []


@pytest.mark.parametrize("name", [n for n, p in PROFILES.items() if p.backend == "cuda"])
def test_every_gpu_profile_fits_the_pinned_beellama(name):
    assert PROFILES[name].engine_refs == BEELLAMA_REFS
    assert refused_line(name, offered(BEELLAMA)) is None


def test_the_help_is_read_as_the_servers_parser_reads_words():
    stock = offered(STOCK)
    # every spelling of an option, the short one padded as to_string() pads it
    for word in ("-a", "--alias", "-bs", "--backend-sampling", "-fa", "--flash-attn",
                 "-ctkd", "--cache-type-k-draft", "--spec-draft-type-k"):
        assert word in stock.options, word
    assert stock.options["-fa"].values == ("on", "off", "auto")
    assert stock.options["--control-vector-layer-range"].values_after == 2
    assert stock.options["--jinja"].values_after == 0
    # `--` words with `_` (common_params_parse_ex reads them as `-`); a negative number and
    # the words after an option that takes two are values, not options
    assert unaccepted(["--cache_type_k", "q8_0", "--seed", "-1",
                       "--control-vector-layer-range", "1", "-2"], stock) == []
    # stock's --spec-type takes a comma list; each type is checked
    assert unaccepted(["--spec-type", "draft-simple,ngram-mod"], stock) == []
    [bad] = unaccepted(["--spec-type", "draft-simple,dflash"], stock)
    assert bad.renamed == "draft-dflash"


# ---------------------------------------------------------------- what does not, is refused


def test_a_turbo_profile_on_a_server_without_turbo_types_is_one_line_naming_them():
    line = refused_line("q8-turbo4-64k", offered(STOCK))
    assert line == (
        "profile `q8-turbo4-64k`: the server built from source.ref 0123456789ab does not "
        "accept `-ctk turbo4`, `-ctv turbo4` (it offers f32, f16, bf16, q8_0, q4_0, q4_1, "
        "iq4_nl, q5_0, q5_1); fix: set `source` to a release profile `q8-turbo4-64k` fits "
        "(source.ref starting with ba1fdce591f5), or choose a profile made for this server "
        "(`beekeeper profiles`)")


def test_a_newer_beellama_names_the_renamed_kv_type_and_speculative_type():
    newer = offered(newer_beellama())
    assert "turbo4" not in newer.options["-ctk"].values
    line = refused_line("q8-turbo4-64k", newer)
    assert line is not None
    assert "does not accept `-ctk turbo4`, `-ctv turbo4` (renamed `kvarn4` there)" in line
    line = refused_line("q8-turbo3tcq-dflash-128k", newer)
    assert line is not None and "\n" not in line
    assert "`-ctk turbo3_tcq`, `-ctv turbo3_tcq` (renamed `kvarn3` there)" in line
    assert "`--spec-type dflash` (renamed `draft-dflash` there)" in line
    assert "`-cd` (no such option there)" in line
    assert line.endswith("fits (source.ref starting with ba1fdce591f5), or choose a profile "
                         "made for this server "
                         "(`beekeeper profiles`)")
    # what it still takes stays taken
    assert refused_line("q4km-f16-32k", newer) is None


def test_extra_args_are_read_by_name_and_only_warned_about():
    stock = offered(STOCK)
    # a value the help does not list is the user's (llama.cpp takes `1` for `on`)
    assert unaccepted(["--log-colors", "1"], stock, check_values=False) == []
    unlisted = unaccepted(["--spec-dflash-cross-ctx", "512", "--metrics"], stock,
                          check_values=False)
    assert [u.word for u in unlisted] == ["`--spec-dflash-cross-ctx`"]
    assert extra_warning("profile `cpu-tiny`", "source.ref x", unlisted) == (
        "profile `cpu-tiny`: the server built from source.ref x does not list "
        "`--spec-dflash-cross-ctx` of server_extra_args (its `--help`): if it does not "
        "start, the smoke check rolls it back")
    assert extra_warning("profile `cpu-tiny`", "source.ref x", []) is None


@pytest.mark.parametrize("text", ["", "docker: Error response from daemon: no such image",
                                  "----- common params -----\n\n"])
def test_a_help_that_lists_no_option_is_not_read_as_a_server_that_takes_none(text):
    assert parse_help(text) is None


def test_the_fact_runs_the_binary_or_the_image_and_reads_stdout():
    fact = ServerHelp()
    assert fact.command(binary="/opt/b/llama-server") == \
        "test -x /opt/b/llama-server && timeout 120 /opt/b/llama-server --help 2>/dev/null; true"
    cmd = fact.command(binary="/usr/local/bin/llama-server", image="beekeeper/x:t", gpu=True)
    assert cmd.startswith("docker image inspect beekeeper/x:t >/dev/null 2>&1 && timeout 120 "
                          "docker run --rm --gpus all --entrypoint /usr/local/bin/llama-server")
    assert fact.process([]) is None and fact.process(["-h, --help  x"]) == "-h, --help  x"


def test_a_server_that_hangs_on_help_is_read_as_printing_nothing(tmp_path, monkeypatch):
    """A server (or a container runtime) that never prints its help does not hold the
    deploy's prepare: past HELP_TIMEOUT_S the fact reads nothing (review of df93f55)."""
    import subprocess
    import time

    from beekeeper.facts import engine as engine_fact

    hangs = tmp_path / "llama-server"
    hangs.write_text("#!/bin/sh\nsleep 30\n")
    hangs.chmod(0o755)
    monkeypatch.setattr(engine_fact, "HELP_TIMEOUT_S", 1)
    t0 = time.monotonic()
    p = subprocess.run(["sh", "-c", ServerHelp().command(binary=str(hangs))],
                       capture_output=True, text=True, timeout=20)
    assert p.returncode == 0 and time.monotonic() - t0 < 10
    assert ServerHelp().process(p.stdout.splitlines()) is None


# ---------------------------------------------------------------- where the deploy checks


NEWER_REF = {"git": "https://github.com/Anbeeld/beellama.cpp", "ref": "b" * 40}


def test_a_server_built_before_is_checked_before_any_change(capsys):
    """The image is there (a deploy that changed the profile, or the engine built earlier):
    the refusal stops the host before any operation, so a dry run says it too."""
    data = {**DEFAULTS, "source": NEWER_REF}
    with pytest.raises(PreflightError) as e:
        run_deploy(data, facts(DockerImageId="sha256:1", ServerHelp=newer_beellama()))
    assert "profile `q8-turbo4-64k`: the server built from source.ref bbbbbbbbbbbb does not " \
           "accept `-ctk turbo4`, `-ctv turbo4` (renamed `kvarn4` there)" in str(e.value)
    # the server it fits, and one whose help listed nothing, go on
    capsys.readouterr()
    for text, unread in ((BEELLAMA, False), (None, True)):
        ops = names(run_deploy(DEFAULTS, facts(DockerImageId="sha256:1", ServerHelp=text)))
        assert not any(n.startswith("Check that the server built") for n in ops)
        assert any(n.startswith("Start and enable beekeeper-llm") for n in ops)
        # a help that listed nothing is said, as after a build, never skipped silently
        assert ("its flags are not checked" in capsys.readouterr().err) is unread


def test_a_server_this_run_builds_is_checked_after_the_build_before_the_service():
    ops = names(run_deploy({**DEFAULTS, "source": NEWER_REF}, facts()))
    check = next(i for i, n in enumerate(ops) if n.startswith("Check that the server built"))
    assert ops[check] == ("Check that the server built from bbbbbbbbbbbb takes the flags of "
                          "q8-turbo4-64k (its --help, before any service changes)")
    assert any(n.startswith("Build server image") for n in ops[:check])
    # before the model's download and anything of the service
    for later in ("Download model", "Render systemd unit", "Remove a stale rollback copy",
                  "Start and enable"):
        assert any(n.startswith(later) for n in ops[check:]), later


class _BuiltHost:
    """What the check run after the build reads of pyinfra's Host: its name and a fact."""

    def __init__(self, help_text: str | None) -> None:
        self.name, self.help_text, self.asked = "gpu-box", help_text, []

    def get_fact(self, cls, **kwargs):
        self.asked.append((cls, kwargs))
        return self.help_text


def test_the_check_after_the_build_fails_the_host_with_the_line(monkeypatch, capsys):
    from beekeeper.core.config import load_host_config
    from beekeeper.core.runtime import runtime_of
    from beekeeper.facts.hostfacts import HostFacts
    from beekeeper.tasks import engine

    monkeypatch.setattr(engine, "failures", dict)  # no pyinfra State here
    cfg = load_host_config({**DEFAULTS, "source": NEWER_REF})
    hf = HostFacts(os=None, init=None, wsl=None, docker=None, gpu=None,  # type: ignore[arg-type]
                   runtime=runtime_of("container", "systemd"),
                   cuda_version="13.2.1", cuda_arch=None)
    reads = engine.reader(hf, "beekeeper/llama-server:t", gpu=True)
    check = engine.after_build(cfg, hf, reads)
    assert check(None, _BuiltHost(BEELLAMA)) is True
    built = _BuiltHost(newer_beellama())
    assert check(None, built) is False
    assert built.asked == [(ServerHelp, {"binary": "/usr/local/bin/llama-server",
                                         "image": "beekeeper/llama-server:t", "gpu": True})]
    err = capsys.readouterr().err
    assert err.startswith("host gpu-box: profile `q8-turbo4-64k`: the server built from "
                          "source.ref bbbbbbbbbbbb does not accept `-ctk turbo4`")
    assert err.count("\n") == 1
    # a --help that lists nothing is not read as a refusal: the smoke check judges it
    assert check(None, _BuiltHost(None)) is True
    assert "its flags are not checked" in capsys.readouterr().err
