"""scripts/setup.sh, offline: which parts each mode installs, and the refusal of Python < 3.11.

The script runs with a PATH of its own: the few real tools it needs, and fakes that record
what it asks of apt-get, pip and the interpreter (nothing is installed, nothing is fetched)."""
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
REAL_TOOLS = ["bash", "sh", "env", "dirname", "basename", "id", "awk", "sha256sum", "cut", "cat",
              "seq", "sleep", "head", "cp", "mkdir", "chmod"]

# An interpreter that says it is $FAKE_PY_VERSION; `-m venv DIR` makes a venv of fakes.
FAKE_PYTHON = r"""#!/bin/bash
echo "$(basename "$0") $*" >> "$FAKE_LOG"
if [ "$1" = -c ]; then
  case $2 in
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


def _exe(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def box(tmp_path):
    """A repository copy with setup.sh and a PATH with no apt, Docker, ssh or Chromium of
    this machine in it."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPTS / "setup.sh", repo / "scripts" / "setup.sh")
    (repo / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in REAL_TOOLS:
        found = shutil.which(tool)
        assert found, f"{tool} is needed to run setup.sh"
        (bin_ / tool).symlink_to(found)
    for name, text in {"python3": FAKE_PYTHON, "python3.11": FAKE_PYTHON,
                       "apt-get": FAKE_APT_GET, "apt-cache": FAKE_APT_CACHE,
                       "docker": FAKE_DOCKER, "sudo": FAKE_SUDO}.items():
        _exe(bin_ / name, text)
    log = tmp_path / "log"
    log.touch()

    def run(*args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], str]:
        e = {"PATH": str(bin_), "FAKE_LOG": str(log), "FAKE_PY_VERSION": "3.11",
             "HOME": str(tmp_path), **env}
        p = subprocess.run([str(bin_ / "bash"), str(repo / "scripts" / "setup.sh"), *args],
                           env=e, capture_output=True, text=True, timeout=60)
        return p, log.read_text()

    run.repo = repo  # type: ignore[attr-defined]
    run.bin = bin_  # type: ignore[attr-defined]
    return run


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
