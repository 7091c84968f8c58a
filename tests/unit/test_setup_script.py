"""scripts/setup.sh, offline: which parts each mode installs, the refusal of Python < 3.11, and
the macOS controller (no apt, no sha256sum, bash 3.2).

The script runs with a PATH of its own: the few real tools it needs, and fakes that record
what it asks of apt-get, pip and the interpreter (nothing is installed, nothing is fetched).

bash 3.2 (macOS's /bin/bash) calls an empty "${a[@]}" unbound under `set -u`; bash 4.4 and
later do not, so this machine's bash cannot catch that. Set BEEKEEPER_TEST_BASH32 to a bash 3.2
binary and every run below is made with it too. One builds on Debian 12 from the bash-3.2.48
source (the bminor/bash mirror's commit f1be666c, "Imported from ../bash-3.2.48.tar.gz"):
`rm y.tab.c y.tab.h` (bison regenerates them), `CFLAGS="-O1 -std=gnu89 -w -fcommon"
./configure --without-bash-malloc --disable-nls && make` (not -j: its Makefile races).
Without it, test_array_expansions_are_safe_under_bash_3_2 checks the script's text."""
import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
REAL_TOOLS = ["bash", "sh", "env", "dirname", "basename", "id", "awk", "sha256sum", "cut", "cat",
              "seq", "sleep", "head", "cp", "mkdir", "chmod", "uname"]
# the tools by the names macOS has: no sha256sum (GNU coreutils), shasum instead, and a few
# setup.sh does not use today, so that a later use of their GNU-only options fails here; uname
# is the fixture's own, saying Darwin
MAC_TOOLS = [t for t in REAL_TOOLS if t not in ("sha256sum", "uname")] + [
    "shasum", "sed", "readlink", "stat", "grep", "xargs", "date", "tr"]
# what macOS's BSD tools lack, given to this machine's GNU ones: any long option (`--x`), and
# these short ones (GNU-only, or with another meaning there)
GNU_ONLY = {"readlink": "-f -e -m", "stat": "-c", "date": "-d", "grep": "-P", "xargs": "-r",
            "sed": "-r"}
BASH32 = os.environ.get("BEEKEEPER_TEST_BASH32", "")
NO_BASH32 = ("no bash 3.2 here: set BEEKEEPER_TEST_BASH32 to a bash 3.2 binary (the module "
             "docstring says how to build one) to run setup.sh as macOS's /bin/bash does")
SHELLS = ["bash", pytest.param("bash32", marks=pytest.mark.skipif(not BASH32, reason=NO_BASH32))]

# An interpreter that says it is $FAKE_PY_VERSION; `-m venv DIR` makes a venv of fakes.
FAKE_PYTHON = r"""#!/bin/bash
echo "$(basename "$0") $*" >> "$FAKE_LOG"
if [ "$1" = -c ]; then
  case $2 in
    *hashlib*) exec "$REAL_PYTHON" "$@" ;;  # setup.sh's sha256 where no tool has one
    *print*) echo "$FAKE_PY_VERSION" ;;
    *sys.exit*) case $FAKE_PY_VERSION in 3.1[1-9]|3.[2-9]?) exit 0 ;; *) exit 1 ;; esac ;;
    *ensurepip*) exit "${FAKE_PY_NO_VENV:-0}" ;;
  esac
  exit 0
fi
if [ "$1 $2" = "-m venv" ]; then
  dir=${!#}; mkdir -p "$dir/bin"; cp "$0" "$dir/bin/python"
  printf '#!/bin/bash\necho "pip $*" >> "$FAKE_LOG"\n' > "$dir/bin/pip"
  printf '#!/bin/bash\necho "usage: beekeeper [-h]"\n' > "$dir/bin/beekeeper"
  chmod +x "$dir/bin/pip" "$dir/bin/beekeeper"
fi
"""
FAKE_APT_GET = '#!/bin/bash\necho "apt-get $*" >> "$FAKE_LOG"\n'
# `apt-cache policy P` has a candidate for the packages named in $FAKE_CANDIDATES only
FAKE_APT_CACHE = r"""#!/bin/bash
if [ "$1" = policy ]; then
  echo "$2:"; echo "  Installed: (none)"
  case " $FAKE_CANDIDATES " in
    *" $2 "*) echo "  Candidate: 1.0" ;;
    *) echo "  Candidate: (none)" ;;
  esac
fi
"""
FAKE_DOCKER = '#!/bin/bash\necho "docker $*" >> "$FAKE_LOG"\n'  # `docker info`: an engine runs
FAKE_SUDO = '#!/bin/bash\nexec "$@"\n'
# macOS's uname: `uname -s` (and plain `uname`) is Darwin
FAKE_UNAME_DARWIN = '#!/bin/bash\ncase ${1:--s} in -m) echo arm64 ;; *) echo Darwin ;; esac\n'


def _fake_python(version: str, venv: bool = True) -> str:
    """FAKE_PYTHON that is `version` whatever FAKE_PY_VERSION says (one of several
    interpreters side by side, as python.org's and Homebrew's are on a Mac)."""
    pinned = f"FAKE_PY_VERSION={version}\n" + ("" if venv else "FAKE_PY_NO_VENV=1\n")
    return FAKE_PYTHON.replace("#!/bin/bash\n", "#!/bin/bash\n" + pinned, 1)


def _exe(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _bsd_shim(tool: str, real: str) -> str:
    """`tool` as macOS has it, in what it accepts: this machine's (GNU) one, refusing every
    long option and GNU_ONLY's short ones, as the BSD tool would (exit 2, naming it)."""
    refused = " ".join(GNU_ONLY.get(tool, "").split())
    return (f"#!{shutil.which('bash')}\n"
            'for a in "$@"; do\n'
            '  case " $a " in\n'
            f'    " -- ") break ;;\n'
            f'    " --"*) echo "{tool}: $a is a GNU-only option (not on macOS)" >&2; exit 2 ;;\n'
            + "".join(f'    " {o} ") echo "{tool}: {o} is GNU-only (not on macOS)" >&2; exit 2 ;;\n'
                      for o in refused.split())
            + "  esac\ndone\n"
            f'exec {real} "$@"\n')


def _make_box(tmp_path: Path, shell: str, tools: list[str], fakes: dict[str, str],
              bsd: bool = False):
    """A repository copy with setup.sh and a PATH of `tools` (this machine's) and `fakes`
    only: no apt, Docker, ssh or Chromium of this machine in it. The script runs under
    `shell`: this machine's bash, or bash 3.2 (BEEKEEPER_TEST_BASH32). `bsd`: each tool
    refuses the options macOS's BSD one lacks (_bsd_shim)."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPTS / "setup.sh", repo / "scripts" / "setup.sh")
    (repo / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in tools:
        found = shutil.which(tool)
        assert found, f"{tool} is needed to run setup.sh"
        if bsd and tool not in ("bash", "sh", "env"):
            _exe(bin_ / tool, _bsd_shim(tool, found))
        else:
            (bin_ / tool).symlink_to(found)
    if shell == "bash32":
        (bin_ / "bash").unlink()
        (bin_ / "bash").symlink_to(BASH32)
    for name, text in fakes.items():
        if (bin_ / name).is_symlink():  # a fake in place of this machine's tool, not over it
            (bin_ / name).unlink()
        _exe(bin_ / name, text)
    log = tmp_path / "log"
    log.touch()

    def run(*args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], str]:
        e = {"PATH": str(bin_), "FAKE_LOG": str(log), "FAKE_PY_VERSION": "3.11",
             "HOME": str(tmp_path), "REAL_PYTHON": sys.executable, **env}
        p = subprocess.run([str(bin_ / "bash"), str(repo / "scripts" / "setup.sh"), *args],
                           env=e, capture_output=True, text=True, timeout=60)
        return p, log.read_text()

    run.repo = repo  # type: ignore[attr-defined]
    run.bin = bin_  # type: ignore[attr-defined]
    return run


@pytest.fixture(params=SHELLS)
def box(tmp_path, request):
    """A Debian/Ubuntu controller: apt-get, apt-cache, sudo and docker faked."""
    return _make_box(tmp_path, request.param, REAL_TOOLS, {
        "python3": FAKE_PYTHON, "python3.11": FAKE_PYTHON, "apt-get": FAKE_APT_GET,
        "apt-cache": FAKE_APT_CACHE, "docker": FAKE_DOCKER, "sudo": FAKE_SUDO})


@pytest.fixture(params=SHELLS)
def mac(tmp_path, request):
    """A macOS controller as setup.sh meets it: no apt, no sha256sum (shasum instead), ssh
    built in (the tests add or remove it), `uname` Darwin, python3 the Command Line Tools' 3.9
    unless told."""
    return _make_box(tmp_path, request.param, MAC_TOOLS, {
        "python3": FAKE_PYTHON, "python3.12": FAKE_PYTHON, "ssh": "#!/bin/bash\n",
        "uname": FAKE_UNAME_DARWIN}, bsd=True)


def _installs(log: str) -> list[str]:
    return [w for line in log.splitlines() if line.startswith("apt-get install")
            for w in line.split()[2:] if not w.startswith("-")]


@pytest.mark.parametrize("script", ["setup.sh", "demo.sh", "test.sh"])
def test_scripts_parse(script):
    p = subprocess.run(["bash", "-n", str(SCRIPTS / script)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_demo_and_test_ask_setup_for_their_parts():
    assert "bash scripts/setup.sh demo\n" in (SCRIPTS / "demo.sh").read_text()
    assert "bash scripts/setup.sh test\n" in (SCRIPTS / "test.sh").read_text()


def test_python_older_than_3_11_is_refused_in_one_line_before_anything_is_installed(box):
    p, log = box(FAKE_PY_VERSION="3.10")
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert "Python >= 3.11" in lines[0] and "python3 is 3.10" in lines[0]
    assert "python3.11-venv" in lines[0] and "PYTHON=python3.11" in lines[0]
    assert "apt-get" not in log and "venv" not in log.replace("import venv", "")
    assert not (box.repo / ".venv").exists()


def test_controller_mode_installs_the_controller_only(box):
    p, log = box(FAKE_PY_NO_VENV="1")
    assert p.returncode == 0, p.stderr
    assert _installs(log) == ["openssh-client", "python3-venv"]
    assert "docker" not in log and "chromium" not in log and "debootstrap" not in log
    assert "pip install -q -e ." in log.splitlines()  # the kit, without the test tools
    assert "[setup] ready: usage: beekeeper" in p.stdout


def test_a_user_without_sudo_is_told_in_one_line_before_apt_runs(tmp_path):
    """Debian installed with a root password: a user of no sudo. apt-get is never run, and
    the one line says how (not `sudo: command not found`, then "apt-get update failed")."""
    run = _make_box(tmp_path, "bash", [t for t in REAL_TOOLS if t != "id"], {
        "python3": FAKE_PYTHON, "apt-get": FAKE_APT_GET, "apt-cache": FAKE_APT_CACHE,
        "id": '#!/bin/bash\n[ "$1" = -u ] && echo 1000 || echo "uid=1000(me)"\n'})
    p, log = run(FAKE_PY_NO_VENV="1")
    assert p.returncode == 1 and "apt-get" not in log, (p.stdout, p.stderr, log)
    assert p.stderr.strip().splitlines() == [
        "[setup] installing openssh-client python3-venv needs root, and this user has no sudo: "
        "run this as "
        "root, or install sudo and let this user use it"], p.stderr


def test_python_env_var_is_honoured_for_the_venv_and_its_package(box):
    p, log = box(PYTHON="python3.11", FAKE_PY_NO_VENV="1")
    assert p.returncode == 0, p.stderr
    assert _installs(log) == ["openssh-client", "python3.11-venv"]
    assert "python3.11 -m venv .venv" in log and "python3 -m venv" not in log


def test_demo_mode_adds_docker_and_debootstrap_not_chromium(box):
    p, log = box("demo", FAKE_CANDIDATES="docker.io debootstrap chromium")
    assert p.returncode == 0, p.stderr
    assert "docker.io" in _installs(log) and "debootstrap" in _installs(log)
    assert "chromium" not in log
    assert "pip install -q -e ." in log.splitlines()


def test_test_mode_installs_chromium_where_apt_has_it(box):
    p, log = box("test", FAKE_CANDIDATES="docker.io debootstrap chromium")
    assert p.returncode == 0, p.stderr
    assert "chromium" in _installs(log)
    assert "pip install -q -e .[test]" in log.splitlines()


def test_test_mode_skips_chromium_in_one_note_where_apt_has_none(box):
    # Ubuntu: no `chromium` candidate, and `chromium-browser` would install the snap
    p, log = box("test", FAKE_CANDIDATES="docker.io debootstrap")
    assert p.returncode == 0, p.stderr
    notes = [line for line in p.stdout.splitlines() if "Chromium" in line]
    assert len(notes) == 1 and "report-rendering test skips" in notes[0], p.stdout
    assert not any("chromium" in w for w in _installs(log))


def test_a_demo_part_apt_lacks_stops_with_what_to_do(box):
    p, log = box("demo", FAKE_CANDIDATES="debootstrap")
    assert p.returncode == 1
    assert "apt has no docker.io" in p.stderr
    assert _installs(log) == ["openssh-client"]  # the controller's part only


def test_an_unknown_mode_is_refused(box):
    p, _ = box("gpu")
    assert p.returncode == 2 and "usage: scripts/setup.sh [controller|demo|test]" in p.stderr


def test_a_second_run_changes_nothing(box):
    box("test", FAKE_CANDIDATES="docker.io debootstrap chromium")
    # what the first run installed is now on PATH
    for name in ("ssh", "dockerd", "debootstrap", "chromium", "objdump", "qemu-x86_64", "cc"):
        _exe(box.bin / name, "#!/bin/bash\n")
    log_before = (box.repo.parent / "log").read_text()
    p, log = box("test", FAKE_CANDIDATES="docker.io debootstrap chromium")
    assert p.returncode == 0, p.stderr
    new = log[len(log_before):]
    assert "apt-get" not in new and "pip " not in new and "-m venv" not in new
    # a later controller run keeps the test tools' venv as it is
    p, log = box()
    assert "pip install" not in log[len(log_before):]


# --- macOS as the controller: no apt, no GNU coreutils, bash 3.2 ------------------------

def test_bash_3_2_runs_these_tests_when_given():
    if not BASH32:
        pytest.skip("BEEKEEPER_TEST_BASH32 is not set: the runs above used this machine's bash "
                    "only (the module docstring says how to build bash 3.2)")
    p = subprocess.run([BASH32, "-c", "echo $BASH_VERSION"], capture_output=True, text=True)
    assert p.stdout.startswith("3.2."), p.stdout
    # and it is the bash that fails on what setup.sh avoids
    p = subprocess.run([BASH32, "-c", 'set -u; a=(); echo "${a[@]}"'], capture_output=True,
                       text=True)
    assert p.returncode != 0 and "unbound variable" in p.stderr


def test_array_expansions_are_safe_under_bash_3_2():
    """Every "${a[@]}" in setup.sh is ${a[@]+"${a[@]}"}, or follows a test on that line that
    the array is not empty (`((${#a[@]} == 0)) ||`)."""
    unsafe = []
    for n, line in enumerate((SCRIPTS / "setup.sh").read_text().splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        for m in re.finditer(r'"\$\{(\w+)\[@\]\}"', line):
            name = m.group(1)
            guarded = line[:m.start()].endswith(f"${{{name}[@]+")
            checked = re.search(rf"\(\(\$\{{#{name}\[@\]\}} == 0\)\) \|\|", line[:m.start()])
            if not (guarded or checked):
                unsafe.append(f"{n}: {line.strip()}")
    assert unsafe == []


def _function(name: str) -> str:
    m = re.search(rf"^{name}\(\) \{{\n.*?^\}}\n", (SCRIPTS / "setup.sh").read_text(),
                  re.S | re.M)
    assert m, f"setup.sh has no function {name}"
    return m.group(0)


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("tool", ["sha256sum", "shasum"])
def test_sha256_helper_with_either_tool(tmp_path, shell, tool):
    """setup.sh's own file_sha256, run with sha256sum (Linux) or only shasum (macOS) on PATH,
    under `set -euo pipefail`, beside the empty-array form the script uses."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for t in ("cut", tool):
        (bin_ / t).symlink_to(shutil.which(t))
    f = tmp_path / "pyproject.toml"
    f.write_text("[project]\nname = 'x'\n")
    script = ("set -euo pipefail\n" + _function("file_sha256") +
              'a=(); printf "[%s]" ${a[@]+"${a[@]}"} end; echo\n'
              'file_sha256 "$1"\n')
    sh = BASH32 if shell == "bash32" else shutil.which("bash")
    p = subprocess.run([sh, "-c", script, "setup", str(f)], env={"PATH": str(bin_)},
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["[end]", hashlib.sha256(f.read_bytes()).hexdigest()]


def test_mac_makes_the_venv_with_shasum_and_installs_nothing(mac):
    p, log = mac(PYTHON="python3.12", FAKE_PY_VERSION="3.12")
    assert p.returncode == 0, p.stderr
    assert "apt-get" not in log and "sudo" not in log
    assert "python3.12 -m venv .venv" in log  # no --clear: an empty array, under bash 3.2 too
    assert "pip install -q -e ." in log.splitlines()
    sha = hashlib.sha256((mac.repo / "pyproject.toml").read_bytes()).hexdigest()
    assert (mac.repo / ".venv" / ".pyproject.sha256").read_text() == sha + "\n"
    assert "[setup] ready: usage: beekeeper" in p.stdout
    p, log2 = mac(PYTHON="python3.12", FAKE_PY_VERSION="3.12")  # a second run: nothing
    assert p.returncode == 0, p.stderr
    assert "pip " not in log2[len(log):] and "-m venv" not in log2[len(log):]


def test_mac_with_python_3_9_is_told_what_to_install_in_one_line(mac):
    p, log = mac(FAKE_PY_VERSION="3.9")  # /usr/bin/python3 of Apple's Command Line Tools
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert "python3 is 3.9" in lines[0] and "brew install python@3.12" in lines[0]
    assert "PYTHON=python3.12" in lines[0] and "apt" not in lines[0].replace("no apt", "")
    assert not (mac.repo / ".venv").exists()


def test_mac_without_a_venv_module_is_told_in_one_line(mac):
    p, _ = mac(PYTHON="python3.12", FAKE_PY_VERSION="3.12", FAKE_PY_NO_VENV="1")
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "no apt-get here" in lines[0], p.stderr
    assert "brew install python@3.12" in lines[0]
    assert not (mac.repo / ".venv").exists()


def test_no_ssh_and_no_apt_is_a_note_and_the_venv_is_made(mac):
    (mac.bin / "ssh").unlink()
    p, log = mac(PYTHON="python3.12", FAKE_PY_VERSION="3.12")
    assert p.returncode == 0, p.stderr
    notes = [line for line in p.stdout.splitlines() if "ssh" in line]
    assert len(notes) == 1 and "install OpenSSH" in notes[0] and "@local" in notes[0]
    assert "pip install -q -e ." in log.splitlines()


def test_demo_with_everything_there_expands_no_empty_array(box):
    """demo mode with Docker and debootstrap present: its package loop runs over an empty
    array (the form bash 3.2 refuses unguarded)."""
    for name in ("ssh", "dockerd", "debootstrap"):
        _exe(box.bin / name, "#!/bin/bash\n")
    p, log = box("demo")
    assert p.returncode == 0, p.stderr
    assert "apt-get" not in log and "apt-cache" not in log


@pytest.mark.parametrize("mode", ["demo", "test"])
def test_mac_demo_and_test_stop_at_once_saying_the_sandbox_needs_linux(mac, mode):
    """On a Mac the sandbox host (Docker and debootstrap) can never be set up: one line says
    so and what a Mac does instead, before Python is looked at or anything is made (it said
    `no apt-get here: install docker.io yourself`, which no Mac can do)."""
    p, log = mac(mode, PYTHON="python3.12", FAKE_PY_VERSION="3.9")
    assert p.returncode == 1
    assert p.stderr.strip().splitlines() == [
        f"[setup] setup.sh {mode}: the sandbox host (demo and tests) needs a Linux machine with "
        "Docker and debootstrap; on a Mac run ./scripts/setup.sh (the controller) and deploy to "
        "a GPU box"], p.stderr
    assert log == "" and p.stdout == "" and not (mac.repo / ".venv").exists()


def test_a_linux_without_apt_still_says_what_the_demo_lacks(mac):
    """The stop above is macOS's only: a Linux with no apt makes the controller's checks,
    then names the package the demo needs."""
    _exe(mac.bin / "uname", "#!/bin/bash\necho Linux\n")
    p, _log = mac("demo", PYTHON="python3.12", FAKE_PY_VERSION="3.12")
    assert p.returncode == 1
    assert p.stderr.strip().splitlines() == [
        "[setup] no apt-get here: install docker.io yourself, then run this again"]


def test_the_controller_on_a_mac_is_not_stopped(mac):
    p, log = mac("controller", PYTHON="python3.12", FAKE_PY_VERSION="3.12")
    assert p.returncode == 0, p.stderr
    assert "python3.12 -m venv .venv" in log


# --- macOS: the Python named is not the one installed (python.org gives its newest) --------

def test_mac_naming_a_python_that_is_not_there_is_told_the_one_that_is(mac):
    """The docs' `PYTHON=python3.12` after python.org's installer, which gives python3.13:
    one line names python3.13 and the line to run; nothing is made with another Python."""
    (mac.bin / "python3.12").unlink()
    _exe(mac.bin / "python3.13", _fake_python("3.13"))
    p, log = mac(PYTHON="python3.12", FAKE_PY_VERSION="3.9")
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert "no python3.12" in lines[0], lines[0]
    assert "python3.13 is here" in lines[0]
    assert lines[0].endswith("run this again as PYTHON=python3.13 ./scripts/setup.sh"), lines[0]
    assert "-m venv" not in log and not (mac.repo / ".venv").exists()
    # the line it gave, run: the venv is python3.13's
    p, log = mac(PYTHON="python3.13", FAKE_PY_VERSION="3.9")
    assert p.returncode == 0, p.stderr
    assert "python3.13 -m venv .venv" in log


def test_mac_naming_a_python_by_a_path_that_is_not_there_is_told_the_one_that_is(mac):
    """python.org's framework path given in full, for a release not installed: the same one
    line as for a name (a path is no apt package name, which the venv check looks for)."""
    _exe(mac.bin / "python3.13", _fake_python("3.13"))
    p, log = mac(PYTHON="/Library/Frameworks/Python.framework/Versions/3.12/bin/python3.12",
                 FAKE_PY_VERSION="3.9")
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "no /Library/Frameworks/" in lines[0], p.stderr
    assert "python3.13 is here" in lines[0], lines[0]


def test_mac_python3_too_old_is_told_an_installed_newer_one_with_venv(mac):
    """python3 is Apple's 3.9, PYTHON not set: the newest python3.11 to python3.14 that has
    its venv module is named (3.14 here has none, as an interpreter without ensurepip), and
    python3 is not replaced by it unasked."""
    (mac.bin / "python3.12").unlink()
    _exe(mac.bin / "python3.14", _fake_python("3.14", venv=False))
    _exe(mac.bin / "python3.13", _fake_python("3.13"))
    _exe(mac.bin / "python3.11", _fake_python("3.11"))
    p, log = mac(FAKE_PY_VERSION="3.9")
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert "python3 is 3.9" in lines[0]
    assert "PYTHON=python3.13 ./scripts/setup.sh" in lines[0], lines[0]
    assert "python3.14" not in lines[0] and "python3.11" not in lines[0]
    assert "-m venv" not in log


def test_mac_with_no_python_that_would_do_names_python_orgs_version_too(mac):
    """Nothing here would do: the line says what to install and how to name it, for
    Homebrew's python@3.12 and for python.org's newest alike."""
    p, _ = mac(FAKE_PY_VERSION="3.9")
    assert p.returncode == 1
    (line,) = p.stderr.strip().splitlines()
    assert "brew install python@3.12" in line and "PYTHON=python3.12 ./scripts/setup.sh" in line
    assert "python.org" in line and "PYTHON=python3.13" in line


def test_mac_without_shasum_either_hashes_with_python(mac):
    """Neither sha256sum nor shasum on PATH: the venv's stamp is Python's hashlib's."""
    (mac.bin / "shasum").unlink()
    p, _log = mac(PYTHON="python3.12", FAKE_PY_VERSION="3.12")
    assert p.returncode == 0, p.stderr
    sha = hashlib.sha256((mac.repo / "pyproject.toml").read_bytes()).hexdigest()
    assert (mac.repo / ".venv" / ".pyproject.sha256").read_text() == sha + "\n"


@pytest.mark.parametrize("argv", [["readlink", "-f", "."], ["sed", "--version"],
                                  ["stat", "-c", "%s", "."], ["cut", "--fields=1"],
                                  ["date", "-d", "now"], ["grep", "-P", "x"]])
def test_the_mac_path_refuses_gnu_only_options(mac, argv):
    """The macOS PATH the tests above run setup.sh with really lacks the GNU-only options:
    a use of one in setup.sh would fail them, as it would fail on a Mac."""
    p = subprocess.run([str(mac.bin / argv[0]), *argv[1:]], capture_output=True, text=True,
                       input="", env={"PATH": str(mac.bin)})
    assert p.returncode == 2 and "GNU-only" in p.stderr, (p.returncode, p.stderr)
    assert not (mac.bin / "sha256sum").exists()
    ok = subprocess.run([str(mac.bin / "cut"), "-d", " ", "-f1"], capture_output=True,
                        text=True, input="a b\n", env={"PATH": str(mac.bin)})
    assert ok.stdout == "a\n"  # what setup.sh does use passes


# bash 4+ only, or GNU-only: what macOS's bash 3.2 and BSD tools refuse (the runs above catch
# them where they are run; this catches them anywhere in the script, also with no bash 3.2)
NOT_ON_MACOS = [
    (r"\$\{\w+(,,?|\^\^?)\}", "case conversion ${x,,} / ${x^^} (bash 4)"),
    (r"\b(mapfile|readarray)\b", "mapfile/readarray (bash 4)"),
    (r"\b(declare|local|typeset) -[a-zA-Z]*A", "associative arrays (bash 4)"),
    (r"\|&|&>>", "|& and &>> (bash 4)"),
    (r"\bsed\b[^|;]*\s-i(\s|$)", "sed -i without a suffix (GNU)"),
    (r"\breadlink\s+-[a-z]*f", "readlink -f (GNU)"),
    (r"\b(stat\s+-c|date\s+-d|grep\s+-[a-zA-Z]*P|xargs\s+-r)\b", "a GNU-only option"),
    (r"\b(timeout|nproc|tac|md5sum|sha1sum|realpath)\b", "a GNU coreutils tool"),
]


@pytest.mark.parametrize("pattern, what", NOT_ON_MACOS, ids=[w for _p, w in NOT_ON_MACOS])
def test_setup_uses_nothing_macos_lacks(pattern, what):
    found = [f"{n}: {line.strip()}"
             for n, line in enumerate((SCRIPTS / "setup.sh").read_text().splitlines(), 1)
             if not line.lstrip().startswith("#") and re.search(pattern, line)]
    assert found == [], f"{what}: {found}"
    # sha256sum only where file_sha256 falls back from it
    uses = [line for line in (SCRIPTS / "setup.sh").read_text().splitlines()
            if "sha256sum" in line and not line.lstrip().startswith("#")]
    assert all("command -v sha256sum" in u for u in uses), uses
