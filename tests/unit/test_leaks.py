"""
Nothing leaked (issue 33, points 2 and 3): credentials in URLs are refused when host data is
loaded, with a line that quotes the URL without them; secrets are never a server flag; the
Hub token file on the host is checked before any change; the refusals quote long and
look-alike values so they can be told apart.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from beekeeper.core.config import load_host_config
from beekeeper.core.errors import BeekeeperError, ConfigError
from beekeeper.facts.secrets import SecretFile, SecretFileInfo, parse_secret_file

from .harness import DEFAULTS, facts, run_deploy

COMMIT = "a" * 40
CPU = {"profile": "cpu-tiny", "source": {"git": "https://x/y", "ref": COMMIT}}
SECRET = "s3cr3t-pa55"


def refusal(data: dict) -> str:
    with pytest.raises(ConfigError) as e:
        load_host_config({**CPU, **data})
    return str(e.value)


@pytest.mark.parametrize("key,data", [
    ("source.git", {"source": {"git": f"https://u:{SECRET}@git.example/x.git", "ref": COMMIT}}),
    # GitHub and GitLab take a token as the user name: no colon, still a secret
    ("source.git", {"source": {"git": f"https://{SECRET}@git.example/x.git", "ref": COMMIT}}),
    ("source.git", {"source": {"git": f"ssh://git:{SECRET}@git.example/x.git", "ref": COMMIT}}),
    # a value that also breaks the URL pattern (a space) is refused for the credentials,
    # and quoted without them
    ("source.git", {"source": {"git": f"https://u:{SECRET}@git.example/x y.git",
                               "ref": COMMIT}}),
    ("hf_endpoint", {"hf_endpoint": f"http://user:{SECRET}@mirror/"}),
    ("nvidia_repos.cuda", {"nvidia_repos": {"cuda": f"https://u:{SECRET}@mirror/cuda"}}),
    ("nvidia_repos.toolkit_key", {"nvidia_repos": {"toolkit_key": f"https://{SECRET}@m/k"}}),
    ("server_extra_args", {"server_extra_args": ["--mmproj-url",
                                                 f"https://u:{SECRET}@h/p.gguf"]}),
])
def test_a_url_with_credentials_is_refused_naming_the_key_never_the_secret(key, data):
    msg = refusal(data)
    assert msg.startswith(f"host data `{key}`: "), msg
    assert "credentials" in msg and SECRET not in msg and "***@" in msg, msg
    assert "\n" not in msg


def test_the_fix_points_where_the_credentials_belong():
    git = refusal({"source": {"git": f"https://u:{SECRET}@h/x.git", "ref": COMMIT}})
    assert "ssh://" in git and "credential helper" in git and "source.path" in git
    hub = refusal({"hf_endpoint": f"https://u:{SECRET}@mirror"})
    assert "hf_token_file" in hub
    apt = refusal({"nvidia_repos": {"cuda": f"https://u:{SECRET}@mirror/cuda"}})
    assert "/etc/apt/auth.conf.d/" in apt


def test_a_user_name_alone_in_an_ssh_url_is_no_secret_and_passes():
    cfg = load_host_config({**CPU, "source": {"git": "ssh://git@git.example/x.git",
                                              "ref": COMMIT}})
    assert cfg.source.git == "ssh://git@git.example/x.git"


def test_the_deploy_stops_on_the_credentials_before_any_operation(capsys):
    data = {**DEFAULTS, "source": {"git": f"https://u:{SECRET}@git.example/x.git",
                                   "ref": COMMIT}}
    with pytest.raises(BeekeeperError) as e:
        run_deploy(data, facts())
    out = capsys.readouterr()
    assert "source.git" in str(e.value)
    assert SECRET not in str(e.value) + out.out + out.err


def test_redact_covers_every_url_in_a_line_and_a_password_holding_at():
    from beekeeper.core.hostdata import redact

    line = redact(f"x 'https://u:{SECRET}@ss@host/a' and http://tok@h/ ssh://git@h:22/x")
    assert SECRET not in line and "ss@host" not in line
    assert line == "x 'https://***@host/a' and http://***@h/ ssh://***@h:22/x"


# ------------------------------------------------------------------ server_extra_args

@pytest.mark.parametrize("args,flag", [
    (["--hf-token", "hf_x"], "--hf-token"), (["-hft", "hf_x"], "-hft"),
    (["--hf-token=hf_x"], "--hf-token"), (["--api-key", "k"], "--api-key"),
    (["--api_key", "k"], "--api-key"),  # llama.cpp reads `_` in a `--` flag as `-`
])
def test_a_secret_flag_is_refused_and_its_value_never_quoted(args, flag):
    msg = refusal({"server_extra_args": args})
    assert msg.startswith("host data `server_extra_args`: ") and flag in msg, msg
    assert "hf_x" not in msg and "command line" in msg


@pytest.mark.parametrize("args", [
    ["--system-prompt", "-c"], ["-sys", "--port"], ["--reverse-prompt", "-np"],
    ["--seed", "-1"], ["-n", "-2"], ["--threads", "8"],
])
def test_a_value_starting_with_a_dash_is_a_value_as_llama_cpp_reads_it(args):
    cfg = load_host_config({**CPU, "server_extra_args": args})
    assert cfg.service.data.server_extra_args == tuple(args)


@pytest.mark.parametrize("args", [["--ctx_size", "512"], ["--jinja", "-c", "512"],
                                  ["--system-prompt", "x", "-c", "512"]])
def test_a_kit_flag_after_a_flag_without_a_value_is_still_the_kits(args):
    msg = refusal({"server_extra_args": args})
    assert "ctx_size" in msg or "the profile" in msg, msg


# ------------------------------------------------------------------ hf_token_file on the host

TOKEN = "/etc/beekeeper/hf_token"


@pytest.mark.parametrize("info,words", [
    (SecretFileInfo(kind="missing"), "is not on the host"),
    (SecretFileInfo(kind="folder"), "is a folder"),
    (SecretFileInfo(kind="file", mode=0o600, chars=0), "is empty"),
    (SecretFileInfo(kind="file", mode=0o644, chars=37),
     "readable by others (mode 644)"),
    (None, "could not be read"),
])
def test_a_bad_token_file_stops_the_deploy_before_any_change(info, words):
    with pytest.raises(BeekeeperError) as e:
        run_deploy({**DEFAULTS, "hf_token_file": TOKEN}, facts(SecretFile=info))
    msg = str(e.value)
    assert "host data `hf_token_file`: " in msg and words in msg and TOKEN in msg, msg


@pytest.mark.parametrize("info,fix", [
    (SecretFileInfo(kind="missing"), "`install -m 600 /dev/null '/etc/beekeeper/hf token'`"),
    (SecretFileInfo(kind="file", mode=0o600, chars=0),
     "`install -m 600 /dev/null '/etc/beekeeper/hf token'`"),
    # a token may be in it: made readable, never replaced by an empty file
    (SecretFileInfo(kind="file", mode=0o600, chars=37, readable=False),
     "`chown root '/etc/beekeeper/hf token' && chmod 600 '/etc/beekeeper/hf token'`"),
    (SecretFileInfo(kind="file", mode=0o644, chars=37),
     "`chmod 600 '/etc/beekeeper/hf token'`"),
])
def test_a_bad_token_files_fix_is_pasted_as_it_is_by_root_without_sudo(info, fix):
    """A pod's root has no sudo: the fix says root (or sudo), and quotes the path."""
    with pytest.raises(BeekeeperError) as e:
        run_deploy({**DEFAULTS, "hf_token_file": "/etc/beekeeper/hf token"},
                   facts(SecretFile=info))
    msg = str(e.value)
    assert "on the host as root" in msg and fix in msg and "sudo install" not in msg, msg


def test_a_root_only_token_file_deploys_and_is_passed_by_path_only():
    good = SecretFileInfo(kind="file", mode=0o600, chars=37)
    ops = run_deploy({**DEFAULTS, "hf_token_file": TOKEN}, facts(SecretFile=good))
    assert ops and all(SECRET not in " ".join(c) for _, c in ops)


def test_the_token_file_fact_reads_kind_mode_and_size_never_the_token(tmp_path):
    (tmp_path / "t").write_text(f"  {SECRET}\n")
    (tmp_path / "t").chmod(0o644)
    (tmp_path / "e").write_text(" \n")
    (tmp_path / "d").mkdir()
    seen = {}
    for name in ("t", "e", "d", "none"):
        cmd = SecretFile().command(path=str(tmp_path / name))
        out = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, check=True)
        assert SECRET not in out.stdout + out.stderr
        seen[name] = parse_secret_file(out.stdout.splitlines())
    assert seen["t"] is not None and (seen["t"].kind, seen["t"].mode, seen["t"].chars) == \
        ("file", 0o644, len(SECRET))
    assert seen["e"] is not None and seen["e"].chars == 0
    assert [seen[n].kind for n in ("d", "none")] == ["folder", "missing"]  # type: ignore[union-attr]
    assert parse_secret_file([]) is None


# ------------------------------------------------------------------ how refusals quote values

def test_a_long_value_is_cut_with_its_length():
    msg = refusal({"profile": "x" * 5000})
    assert len(msg) < 600 and "(5000 characters)" in msg, msg


def test_a_look_alike_value_is_spelled_out_and_a_near_miss_gets_did_you_mean():
    msg = refusal({"profile": "\u0441pu-tiny"})  # a Cyrillic es
    assert "'\\u0441pu-tiny'" in msg and "did you mean 'cpu-tiny'" in msg, msg
    assert "did you mean 'cpu-tiny'" in refusal({"profile": "CPU_TINY"})
    assert "did you mean 'native'" in refusal({"mode": "Native"})
    assert "did you mean 'proprietary'" in refusal({"driver_flavour": "propietary"})


def test_the_readme_says_where_the_token_file_is():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `hf_token_file`"))
    assert "on the host" in row and "controller" not in row, row
