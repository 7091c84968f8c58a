"""The commands README.md and docs/*.md show, checked against the kit (fast offline tier: no
marker, no network, no Docker, no host).

Which blocks hold commands: a fenced block tagged `sh`, `bash`, `shell` or `console`, or not
tagged at all; blocks tagged anything else (`text`, `python`, `yaml`, `ini`) are not commands.
A command is one line of such a block, with `\\` continuations joined, a leading `$ ` and a
trailing ` # comment` dropped.

Each command is classified by the first rule in RULES that matches it:

- `offline`: runs here with nothing but the checkout and `.venv` (`beekeeper --help`,
  `beekeeper profiles`, `beekeeper plan`, `pyinfra --version`): the test runs it with
  `.venv/bin` first on PATH, in the checkout, and it must exit 0;
- `gpu`: needs an NVIDIA GPU or a server of a GPU profile (`beekeeper verify` of a GPU
  profile, `nvidia-smi`, `llama-bench`);
- `host`: needs a remote host (a deploy of a real inventory, anything over ssh, the host's
  units and files: the folders of beekeeper/core/paths.py, a Windows command);
- `docker-or-root`: needs Docker or root here (sudo, apt, the set-up scripts, the sandbox);
- `network`: installs from a package registry (`.venv/bin/pip install`, `brew install`);
- `reports`: reads the report folders of earlier verify runs (`beekeeper report`);
- `tier`: a test tier itself (pytest, ruff, mypy, mutation testing), never run from inside
  the tests;
- `clone`: the user's own clone or the files it writes there (`cd beekeeper`, a key file
  under `keys/`), never run from the tests, which would write into this checkout;
- `user-file`: reads a file only the user has (`beekeeper plan --gguf` of their own model).

A command that no rule matches fails: a new command in the docs must be classified here.
Every `beekeeper <sub> --flag` the pages name, in command blocks and in inline code, must be a
sub-command `beekeeper --help` lists and a flag `beekeeper <sub> --help` lists; every
`--flag` of a `pyinfra` command must be one `pyinfra --help` lists.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from beekeeper.core import paths

from .harness import _env, blocks, flags_of, help_text, shell_commands as commands, subcommands

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

HOST_DIRS = "|".join(re.escape(d) for d in sorted({
    paths.CONF_ROOT, paths.STATE_DIR, paths.REPORTS_DIR, paths.LOG_DIR, paths.MODEL_DIR,
    paths.NATIVE_PREFIX, paths.HOSTSIDE_DIR, paths.HOST_VENV, paths.VERIFY_KIT,
    paths.VERIFY_VENV, "/etc/systemd/system"}))

# (class, pattern, why): the first match decides
RULES: list[tuple[str, str, str]] = [
    ("offline", r"^(beekeeper( [a-z]+)?|pyinfra) (--help|-h|--version)$", "help and version"),
    ("docker-or-root", r"inventories/sandbox\.py|--sandbox\b", "the local sandbox host"),
    ("host", r"ssh://|--ssh\b|--on-host\b|(^|[\s;&|(])(ssh|autossh|scp)\s", "over ssh"),
    ("host", r"^([A-Z_]+=\S+ )*pyinfra\b.*\sinventories/\S+", "a deploy of a real inventory"),
    ("host", r"^git clone\b", "the repository, over the network"),
    ("clone", r"^cd beekeeper$", "the folder the user cloned the kit into"),
    ("clone", r"^mkdir -p keys && openssl rand\b", "a key file written into the user's clone"),
    ("host", r"^ssh-copy-id\b", "a key put on the GPU box"),
    ("host", r"^export BEEKEEPER_\w+=", "the pod's inventory variables, set in the pod's shell"),
    ("host", r"(^|[\s=(])/workspace(/|\s|$)", "a GPU pod's volume"),
    ("user-file", r"^beekeeper plan\b.*--gguf\s", "a GGUF of the user's own"),
    ("gpu", r"^curl\b.*127\.0\.0\.1:8083/v1/", "a request to the deployed server"),
    ("gpu", r"^curl\b.*/v1/", "a request to a deployed server elsewhere"),
    ("host", r"^(journalctl|systemctl|docker compose|modprobe|dmesg|mokutil|dkms)\b",
     "the host's units and kernel"),
    ("host", rf"(^|[\s=])({HOST_DIRS})(/|\s|$)", "the host's files (beekeeper/core/paths.py)"),
    ("host", r"^(schtasks|wsl(\.exe)?|cmd(\.exe)?)\b", "a Windows host"),
    ("host", r"^beekeeper (rollback|matrix)\b", "acts on a deployed host"),
    ("docker-or-root", r"^(sudo|apt|apt-get|docker)\b", "root or the Docker engine"),
    ("docker-or-root", r"^([A-Z_]+=\S+ )*\./scripts/(setup|demo|test|test-slow)\.sh\b",
     "the set-up scripts install with apt; demo and tests run the sandbox"),
    ("docker-or-root", r"^beekeeper (sandbox|demo)\b", "the local sandbox host"),
    ("docker-or-root", r"^beekeeper verify\b.*--profile cpu-", "a CPU server in the sandbox"),
    ("gpu", r"^beekeeper verify\b", "a running server of a GPU profile"),
    ("gpu", r"(^|\s)(nvidia-smi|llama-bench)\b", "an NVIDIA GPU"),
    ("tier", r"^(\.venv/bin/)?(python -m )?(pytest|ruff|mypy)\b|scripts/(mypy\.sh|mutation\.py)",
     "a test tier itself"),
    ("network", r"^\.venv/bin/pip install\b", "installs from PyPI"),
    ("network", r"^brew install\b", "Homebrew, on macOS"),
    ("reports", r"^beekeeper report\b", "the report folders of earlier verify runs"),
    ("offline", r"^beekeeper (profiles|plan)\b", "reads profiles and group_data only"),
    ("offline", r"^\. \.venv/bin/activate$", "the controller's venv"),
]


def classify(command: str) -> str | None:
    for cls, pattern, _why in RULES:
        if re.search(pattern, command):
            return cls
    return None


ALL = [c for p in PAGES for c in commands(p)]


def inline_spans(page: Path) -> list[str]:
    """Inline code outside fenced blocks (a span may wrap onto the next line)."""
    lines = page.read_text().splitlines()
    fenced = {n for _t, first, body in blocks(page.read_text())
              for n in range(first - 1, first + len(body) + 1)}
    prose = "\n".join(line for n, line in enumerate(lines, 1) if n not in fenced)
    return re.findall(r"`([^`]+)`", prose)


def beekeeper_mentions() -> list[tuple[str, str]]:
    """(where, text from `beekeeper <sub>` on) for every mention in commands and inline code."""
    found = [(c.id, c.text) for c in ALL]
    found += [(p.relative_to(ROOT).as_posix(), s) for p in PAGES for s in inline_spans(p)]
    out: list[tuple[str, str]] = []
    for where, text in found:
        for m in re.finditer(r"(?<![\w./-])beekeeper\s+(?=[a-z-])", text):
            out.append((where, " ".join(text[m.start():].split())))
    return out


# --- the rule itself ---------------------------------------------------------------------

@pytest.mark.parametrize("command, expected", [
    ("beekeeper --help", "offline"),
    ("beekeeper plan --profile q8-turbo4-64k", "offline"),
    ("pyinfra inventories/home.py deploy.py --dry", "host"),
    ("pyinfra -y inventories/sandbox.py deploy.py", "docker-or-root"),
    ("beekeeper verify --url http://127.0.0.1:8083 --profile q8-turbo4-64k --suite all", "gpu"),
    ("beekeeper verify --on-host --ssh gpu-box --profile q8-turbo4-64k", "host"),
    ("cat /var/lib/beekeeper/reports/beekeeper-llm-smoke.json", "host"),
    ("journalctl -u beekeeper-llm -n 200 --no-pager", "host"),
    ("PYTHON=python3.11 ./scripts/setup.sh", "docker-or-root"),
    ("./scripts/test.sh", "docker-or-root"),
    (".venv/bin/pytest -m 'not integration' -q", "tier"),
    (".venv/bin/python -m pytest -n 2 -m 'not integration and not network' -q", "tier"),
    (".venv/bin/pip install -e '.[test]'", "network"),
    ("cd beekeeper", "clone"),
    ("export BEEKEEPER_MODEL=/workspace/models/m.gguf", "host"),
    ("mkdir -p /workspace/src && cd /workspace/src", "host"),
    ("beekeeper plan --profile q8-turbo4-64k --gguf /workspace/m.gguf", "host"),
    ("beekeeper plan --profile q8-turbo4-64k --gguf models/m.gguf", "user-file"),
    ("beekeeper plan --profile q8-turbo4-64k --card 'RTX 4090'", "offline"),
    ("ssh-copy-id me@gpu-box.lan", "host"),
    ("rm -rf /", None),
    ("cd /", None),
])
def test_rule_classifies(command, expected):
    assert classify(command) == expected


def test_commands_are_found():
    """The extraction sees the README's commands (an empty list would pass everything)."""
    readme = {c.text for c in ALL if c.page == "README.md"}
    assert "beekeeper profiles" in readme
    assert "pyinfra inventories/home.py deploy.py" in readme


# --- the pages ---------------------------------------------------------------------------

@pytest.mark.parametrize("cmd", ALL, ids=[c.id for c in ALL])
def test_command_is_classified(cmd):
    assert classify(cmd.text), (f"{cmd.id}: `{cmd.text}` matches no rule in "
                                "tests/unit/test_readme.py RULES; add one (offline, gpu, host, "
                                "docker-or-root, tier, clone, user-file)")


OFFLINE = [c for c in ALL if classify(c.text) == "offline"]


@pytest.mark.parametrize("cmd", OFFLINE, ids=[c.id for c in OFFLINE])
def test_offline_command_runs(cmd):
    done = subprocess.run(["bash", "-c", cmd.text], cwd=ROOT, env=_env(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, (f"{cmd.id}: `{cmd.text}` exited {done.returncode}:\n"
                                  f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")


MENTIONS = beekeeper_mentions()


@pytest.mark.parametrize("where, text", MENTIONS, ids=[f"{w}:{t[:40]}" for w, t in MENTIONS])
def test_beekeeper_names_exist(where, text):
    words = text.split()
    sub = words[1].strip("`,.;:)")
    if sub.startswith("-"):
        assert flags_of(text) <= flags_of(help_text("beekeeper")), f"{where}: {text}"
        return
    assert sub in subcommands(), f"{where}: `beekeeper {sub}` is not a beekeeper sub-command"
    unknown = flags_of(text) - flags_of(help_text("beekeeper", sub))
    assert not unknown, f"{where}: `beekeeper {sub}` has no {sorted(unknown)}: {text}"


PYINFRA = [c for c in ALL if c.text.startswith("pyinfra ")]


@pytest.mark.parametrize("cmd", PYINFRA, ids=[c.id for c in PYINFRA])
def test_pyinfra_flags_exist(cmd):
    unknown = flags_of(cmd.text) - flags_of(help_text("pyinfra"))
    assert not unknown, f"{cmd.id}: pyinfra has no {sorted(unknown)}"


def test_readme_shows_what_ci_runs():
    """.ci/run runs the README's test command: each script it runs is a README command."""
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip().startswith("./scripts/")]
    assert ci, ".ci/run runs no ./scripts/ command"
    readme = {c.text for c in ALL if c.page == "README.md"}
    assert ci[0] in readme, f"README.md no longer shows `{ci[0]}`, the command CI runs"


def test_host_data_keys_section_and_markers():
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    for marker in ("## Host data keys", "<!-- host-data-keys:begin -->",
                   "<!-- host-data-keys:end -->"):
        assert lines.count(marker) == 1, f"README.md must hold `{marker}` once, on its own line"
    assert (lines.index("## Host data keys") < lines.index("<!-- host-data-keys:begin -->")
            < lines.index("<!-- host-data-keys:end -->"))


def test_docs_pages_are_linked_and_links_resolve():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).resolve().exists(), f"{page.name} links {target}"
    readme = (ROOT / "README.md").read_text()
    for page in PAGES[1:]:
        assert f"](docs/{page.name}" in readme, f"README.md does not link docs/{page.name}"


# --- claims of the first-hour path (issue 43), checked against the kit -----------------------

def _readme_flat() -> str:
    return " ".join((ROOT / "README.md").read_text().split())


def test_the_fast_tier_follows_the_setup_it_needs():
    """The README's fast-tier command comes after a command that installs the test extra, and
    that extra holds what the command's options need (-n: pytest-xdist)."""
    import tomllib

    readme = [c.text for c in ALL if c.page == "README.md"]
    fast = [i for i, t in enumerate(readme) if re.match(r"\.venv/bin/python -m pytest -n 2 ", t)]
    assert fast, "README.md shows no fast-tier command in a command block"
    setup = [i for i, t in enumerate(readme)
             if t == ".venv/bin/pip install -e '.[test]'" or t == "./scripts/setup.sh test"]
    assert setup and min(setup) < fast[0], "no set-up of the test tools before the fast tier"
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["test"]
    assert any(e.startswith("pytest-xdist") for e in extras)
    assert 'extras=test' in (ROOT / "scripts" / "setup.sh").read_text()  # setup.sh test


def test_the_wsl_way_out_names_the_cuda_the_kit_can_follow():
    """The WSL2 section's CUDA versions and releases are cudacompat's, below cuda_version; its
    `--data cuda_follows_driver=true` is read by pyinfra as True, which host data takes."""
    import runpy
    import sys

    from beekeeper.core import cudacompat
    from beekeeper.core.config import load_host_config

    text = _readme_flat()
    section = text.split("#### WSL2 with an older Windows driver", 1)[1].split("**1. Clone", 1)[0]
    group = runpy.run_path(str(ROOT / "group_data" / "all.py"))
    data = {k: v for k, v in group.items() if not k.startswith("_") and not callable(v)
            and type(v).__name__ != "module"}
    cuda = load_host_config(data).data.cuda_version  # every host's, as the kit reads it
    target = cudacompat.major_minor(cuda)
    follow = sorted(mm for mm in cudacompat.NEWEST_RELEASE if mm < target)
    names = [cudacompat.spell(mm) for mm in follow]
    releases = [cudacompat.NEWEST_RELEASE[mm] for mm in follow]
    said = ", ".join(names[:-1]) + f" or {names[-1]}"
    assert f"{said}: set `cuda_follows_driver = True`" in section
    assert "(nvidia/cuda " + ", ".join(releases[:-1]) + f" or {releases[-1]})" in section
    assert f"instead of {cuda}" in section
    assert f"{said}: `cuda_follows_driver = True`" in text  # the table's WSL2 row
    assert "--data cuda_follows_driver=true" in section
    # pyinfra's own parse of --data values, in a process of its own (pyinfra_cli patches the
    # interpreter with gevent on import)
    done = subprocess.run([sys.executable, "-c", "from pyinfra_cli.util import parse_cli_arg; "
                           "assert parse_cli_arg('true') is True"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert load_host_config({**data, "cuda_follows_driver": True}).data.cuda_follows_driver


def test_verify_outcomes_table_gives_the_codes_exit_statuses():
    from beekeeper.verify.judge import EXIT_FAILED, EXIT_NOT_JUDGED, EXIT_PASSED

    text = _readme_flat()
    for word, code in (("PASSED", EXIT_PASSED), ("FAILED", EXIT_FAILED),
                       ("INCOMPLETE", EXIT_NOT_JUDGED)):
        assert f"| `verify {word}` | {code} |" in text, word
    assert "Exit 2 is a usage or set-up error" in text
    assert "2 a usage or set-up error" in " ".join(help_text("beekeeper", "verify").split())
    # the options the table sends a user to exist
    for flag in ("--settle-budget-s", "--on-host", "--ssh"):
        assert flag in flags_of(help_text("beekeeper", "verify"))


def test_the_windows_paragraph_names_the_served_url():
    text = _readme_flat()
    para = text.split("**From Windows apps, with the server in WSL2.**", 1)[1].split("**5.", 1)[0]
    from beekeeper.core.config import group_all, load_host_config

    svc = load_host_config(group_all()).service  # every host's, as the kit reads it
    assert f"`http://localhost:{svc.data.port}/v1`, model `{svc.profile.name}`" in para
    assert "`localhostForwarding`" in para and "not cover" in para
