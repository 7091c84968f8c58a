"""The first hour of a Mac controller deploying to a Linux GPU box over SSH, as README.md and
docs/quickstart-ssh.md walk it (fast offline tier: no network, no Docker; the SSH test uses a
throwaway sshd on this machine's loopback):

- pyinfra logs in with Paramiko, which (without --key) never asks for a key's passphrase:
  the page makes a key, puts it in ssh-agent (macOS's starts empty) and checks the login
  with pyinfra's own client, not only with OpenSSH's `ssh` (which asks, or takes the
  passphrase from Keychain);
- zsh, macOS's shell, takes `#` as a comment only after `setopt interactivecomments`: the
  lines a Mac user copies carry no `# comment`;
- python.org's installer gives its newest Python (python3.13 or newer), not python3.12;
- `setup.sh demo` and `test` need Linux (tests/unit/test_setup_script.py runs the script).
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from .harness import VENV_BIN, blocks, flags_of, help_text, shell_commands

ROOT = Path(__file__).resolve().parents[2]
SSH_PAGE = ROOT / "docs" / "quickstart-ssh.md"
README = ROOT / "README.md"


def _section(text: str, start: str, end: str) -> str:
    assert start in text, start
    return text.split(start, 1)[1].split(end, 1)[0]


def _step2() -> str:
    return _section(SSH_PAGE.read_text(), "## 2. SSH and root on the host", "## 3. ")


def _spans(text: str, prefix: str) -> list[str]:
    """Inline code in `text`, outside fenced blocks, that starts with `prefix` (a span may wrap
    onto the next line)."""
    prose = re.sub(r"^\s*```.*?^\s*```", "", text, flags=re.S | re.M)
    return [" ".join(s.split()) for s in re.findall(r"`([^`]+)`", prose)
            if s.startswith(prefix)]


def _readme_mac() -> str:
    return _section(README.read_text(), "**macOS as the controller.**", "## Use it on your GPU box")


# --- the key: made, in the agent, and checked with pyinfra's own client -----------------------

def test_step_2_makes_the_key_and_puts_it_in_the_agent_before_the_login_is_checked():
    step = _step2()
    flat = " ".join(step.split())
    assert _spans(step, "ssh-keygen") == ["ssh-keygen -t ed25519"]
    adds = _spans(step, "ssh-add")
    assert "ssh-add --apple-use-keychain ~/.ssh/id_ed25519" in adds  # macOS
    assert "ssh-add ~/.ssh/id_ed25519" in adds  # elsewhere
    assert "macOS's agent starts empty" in flat
    assert "without `--key` it never asks for a key's passphrase" in flat
    # all before the key goes onto the host, and the pyinfra check after the OpenSSH one
    at = [step.index(s) for s in ("`ssh-keygen", "`ssh-add --apple", "ssh-copy-id me@",
                                  "ssh me@gpu-box.lan sudo -n true", "`pyinfra gpu-box.lan")]
    assert at == sorted(at), at
    assert '"Private key file is encrypted"' in flat  # the error a user meets, said as printed


def _pyinfra_check() -> list[str]:
    (check,) = _spans(_step2(), "pyinfra ")
    return shlex.split(check)


def test_the_pyinfra_check_is_pyinfra_3s_own_syntax():
    """`pyinfra INVENTORY exec -- COMMAND` (pyinfra --help's form), with options pyinfra has,
    the login the page's deploy lines use, and the same sudo check as the OpenSSH line."""
    words = _pyinfra_check()
    assert words[:2] == ["pyinfra", "gpu-box.lan"]
    assert words[words.index("exec"):] == ["exec", "--", "sudo", "-n", "true"]
    assert "pyinfra INVENTORY exec -- " in help_text("pyinfra")
    assert flags_of(" ".join(words)) <= flags_of(help_text("pyinfra"))
    deploys = [c.text for c in shell_commands(SSH_PAGE)
               if c.text.startswith("BEEKEEPER_HOSTS=gpu-box.lan pyinfra ")]
    assert deploys and all("--ssh-user me " in d for d in deploys)
    assert words[words.index("--ssh-user") + 1] == "me"


def test_the_pyinfra_check_runs_the_page_s_command_as_written(tmp_path):
    """The page's line, run from the clone with @local for gpu-box.lan: pyinfra passes
    `sudo -n true` through as one command (a stand-in sudo records what it got) and exits 0,
    printing the `[host] Success` the page says to look for."""
    fake = tmp_path / "bin"
    fake.mkdir()
    record = tmp_path / "sudo-argv"
    (fake / "sudo").write_text(f'#!/bin/sh\necho "$*" > {record}\n')
    (fake / "sudo").chmod(0o755)
    words = ["@local" if w == "gpu-box.lan" else w for w in _pyinfra_check()]
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{VENV_BIN}{os.pathsep}{os.environ['PATH']}"}
    p = subprocess.run([str(VENV_BIN / "pyinfra"), *words[1:]], cwd=ROOT, env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert "[@local] Success" in p.stdout + p.stderr
    assert record.read_text() == "-n true\n"
    assert "`[gpu-box.lan] Success`" in _step2()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_pyinfra_check_fails_where_ssh_passes_until_the_key_is_in_the_agent(tmp_path):
    """The trap step 2 is for, on a throwaway sshd here: a key with a passphrase, not in the
    agent. The page's OpenSSH line logs in (ssh asks the passphrase); the page's pyinfra line
    stops with "Private key file is encrypted"; after the page's `ssh-add` line (the Linux
    form; macOS's adds only --apple-use-keychain) it passes."""
    tools = ("sshd", "ssh", "ssh-keygen", "ssh-agent", "ssh-add")
    sshd = shutil.which("sshd") or ("/usr/sbin/sshd" if Path("/usr/sbin/sshd").exists() else None)
    if not sshd or not all(shutil.which(t) for t in tools[1:]):
        pytest.skip(f"needs OpenSSH's {', '.join(tools)}")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    key = home / ".ssh" / "id_ed25519"
    passphrase = "a passphrase"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-f", str(key)],
                   check=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                    str(tmp_path / "hostkey")], check=True)
    auth = tmp_path / "authorized_keys"
    auth.write_text(Path(f"{key}.pub").read_text())
    auth.chmod(0o600)
    fake = tmp_path / "bin"  # the host's sudo, asking no password: the page's sudoers line
    fake.mkdir()
    (fake / "sudo").write_text('#!/bin/sh\n[ "$*" = "-n true" ]\n')
    (fake / "sudo").chmod(0o755)
    port = _free_port()
    config = tmp_path / "sshd_config"
    config.write_text(f"Port {port}\nListenAddress 127.0.0.1\nHostKey {tmp_path / 'hostkey'}\n"
                      f"AuthorizedKeysFile {auth}\nPasswordAuthentication no\nUsePAM no\n"
                      f"KbdInteractiveAuthentication no\nStrictModes no\n"
                      f"PermitRootLogin prohibit-password\nPidFile {tmp_path / 'sshd.pid'}\n"
                      f"SetEnv PATH={fake}:/usr/bin:/bin\n")
    Path("/run/sshd").mkdir(exist_ok=True) if os.geteuid() == 0 else None
    server = subprocess.Popen([sshd, "-D", "-e", "-f", str(config)], stderr=subprocess.PIPE,
                              text=True)
    agent_pid = None
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None:
                    pytest.skip(f"sshd did not start here: {server.stderr.read()[-500:]}")
                time.sleep(0.05)
        user = os.environ.get("USER") or subprocess.run(["id", "-un"], capture_output=True,
                                                        text=True).stdout.strip()
        askpass = tmp_path / "askpass"
        askpass.write_text(f"#!/bin/sh\necho '{passphrase}'\n")
        askpass.chmod(0o755)
        env = {k: v for k, v in os.environ.items() if k not in ("SSH_AUTH_SOCK", "SSH_AGENT_PID")}
        env.update(HOME=str(home), SSH_ASKPASS=str(askpass), SSH_ASKPASS_REQUIRE="force",
                   DISPLAY=":0", PATH=f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}")

        # the page's OpenSSH line: ssh asks the passphrase (the askpass answers) and logs in
        (ssh_line,) = [c.text for c in shell_commands(SSH_PAGE)
                       if c.text.startswith("ssh me@gpu-box.lan ")]
        words = shlex.split(ssh_line)
        # (OpenSSH reads ~ from the passwd entry, not $HOME: the key is named)
        p = subprocess.run(["ssh", "-F", "/dev/null", "-p", str(port), "-o", "BatchMode=no",
                            "-o", f"IdentityFile={key}", "-o", "IdentitiesOnly=yes",
                            "-o", "StrictHostKeyChecking=no",
                            "-o", f"UserKnownHostsFile={tmp_path / 'known_hosts'}",
                            f"{user}@127.0.0.1", *words[2:]], env=env, cwd=tmp_path,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr

        def pyinfra() -> subprocess.CompletedProcess[str]:
            words = _pyinfra_check()
            words[words.index("gpu-box.lan")] = "127.0.0.1"
            words[words.index("--ssh-user") + 1] = user
            at = words.index("exec")  # the port before exec's `--`, which ends the options
            words[at:at] = ["--ssh-port", str(port)]
            p = subprocess.run([str(VENV_BIN / "pyinfra"), *words[1:]], env=env, cwd=tmp_path,
                               stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=120)
            return subprocess.CompletedProcess(p.args, p.returncode, p.stdout + p.stderr, "")

        p = pyinfra()  # no agent: Paramiko finds the key file and cannot open it
        assert p.returncode != 0, p.stdout[-2000:]
        assert "Private key file is encrypted" in p.stdout, p.stdout[-2000:]

        out = subprocess.run(["ssh-agent", "-s"], env=env, capture_output=True, text=True,
                             check=True).stdout
        agent = dict(re.findall(r"(SSH_AUTH_SOCK|SSH_AGENT_PID)=([^;]+);", out))
        agent_pid = int(agent["SSH_AGENT_PID"])
        env.update(agent)
        (linux_add,) = [a for a in _spans(_step2(), "ssh-add ") if "--apple" not in a]
        p = subprocess.run(["bash", "-c", linux_add], env=env, cwd=tmp_path,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        p = pyinfra()
        assert p.returncode == 0, p.stdout[-3000:]
        assert "[127.0.0.1] Success" in p.stdout
    finally:
        if agent_pid:
            os.kill(agent_pid, 15)
        server.terminate()
        server.wait(10)


# --- zsh: no `# comment` on a line a Mac user copies -------------------------------------------

def _comment_words(line: str) -> list[str]:
    """The words from an unquoted `#` that starts a word on: what an interactive zsh without
    interactivecomments passes on as arguments (a comment to bash)."""
    quote, word_start = "", True
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and word_start:
            return line[i:].split()
        word_start = not quote and ch in " \t;&|("
    return []


def _mac_lines() -> list[tuple[str, str]]:
    """(where, line) of every shell line on the SSH quickstart (Linux or macOS controller),
    and of the README's macOS block, continuations joined."""
    out: list[tuple[str, str]] = []
    pages = [(SSH_PAGE, None), (README, "**macOS as the controller.**")]
    for page, after in pages:
        text = page.read_text()
        offset = 0 if after is None else text[:text.index(after)].count("\n") + 1
        body = text if after is None else text[text.index(after):]
        found = [(t, n, b) for t, n, b in blocks(body) if t in ("", "sh", "bash", "shell")]
        if after is not None:
            found = found[:1]  # the macOS block only
        for _tag, first, lines in found:
            pending = ""
            for n, raw in enumerate(lines, first + offset):
                if raw.rstrip().endswith("\\"):
                    pending += raw.rstrip()[:-1].strip() + " "
                    continue
                line, pending = (pending + raw).strip(), ""
                if line:
                    out.append((f"{page.name}:{n}", line))
    return out


def test_the_mac_lines_are_found():
    lines = [line for _w, line in _mac_lines()]
    assert "brew install python@3.12" in lines and "PYTHON=python3.12 ./scripts/setup.sh" in lines
    assert "ssh me@gpu-box.lan sudo -n true" in lines
    assert sum(line.startswith("brew install") for line in lines) == 2  # the page's, README's


def test_no_line_a_mac_user_copies_has_a_comment_zsh_would_pass_on():
    bad = [f"{where}: {line}" for where, line in _mac_lines() if _comment_words(line)]
    assert bad == []
    assert _comment_words("brew install python@3.12   # or the installer") == \
        ["#", "or", "the", "installer"]
    assert _comment_words("""curl -d '{"a": "#1"}' x#y""") == []


def test_zsh_itself_splits_the_mac_lines_with_no_comment_word():
    """zsh's own parse of each line (the (z) flag: as an interactive zsh does without
    interactivecomments), where this machine has zsh."""
    zsh = shutil.which("zsh")
    if not zsh:
        pytest.skip("no zsh here (macOS's shell; the check above is the same in Python)")
    split = 'for l in "$@"; do w=(${(z)l}); print -r -- "${#w}:${(@M)w:#[#]*}"; done'
    lines = [line for _w, line in _mac_lines()]
    p = subprocess.run([zsh, "-f", "-c", split, "zsh", *lines,
                        "brew install python@3.12  # or the installer from python.org"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    *got, old = p.stdout.splitlines()
    assert old == "9:#", old  # the README's old line: `#` and 5 more words reach brew
    commented = [line for line, out in zip(lines, got, strict=True) if out.split(":", 1)[1]]
    assert commented == []


def test_the_readme_mac_part_says_how_zsh_takes_the_other_blocks_comments():
    mac = " ".join(_readme_mac().split())
    assert "zsh (macOS's shell): run `setopt interactivecomments` first, or leave out the " \
           "`# ...` parts" in mac
    ssh = " ".join(SSH_PAGE.read_text().split())
    assert "`setopt interactivecomments`" in ssh
    for block in [b for t, _n, b in blocks(SSH_PAGE.read_text()) if t in ("", "sh")]:
        assert not [x for x in block if x.lstrip().startswith("#")], block


# --- Python: the version the Mac user installed --------------------------------------------------

@pytest.mark.parametrize("page", [SSH_PAGE, README])
def test_the_mac_part_names_the_python_each_installer_gives(page):
    """Homebrew's python@3.12 is python3.12; python.org's installer gives its newest (3.13 or
    newer), so the page names that version, not python3.12, for it."""
    text = page.read_text()
    mac = _readme_mac() if page == README else _section(text, "On **macOS**", "On **Ubuntu")
    flat = " ".join(mac.split())
    lines = [line for _w, line in _mac_lines() if _w.startswith(page.name)]
    (brew,) = [line for line in lines if line.startswith("brew install python@")]
    version = brew.removeprefix("brew install python@")
    assert f"PYTHON=python{version} ./scripts/setup.sh" in lines
    assert "python.org" in flat and "(3.13 or newer)" in flat
    named = re.findall(r"`PYTHON=python(3\.\d+) ./scripts/setup\.sh`", flat)
    assert named and all(v != version for v in named), named
    assert "`python3.11` to `python3.14`" in flat  # what setup.sh looks for
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert "for p in python3.14 python3.13 python3.12 python3.11; do" in setup


# --- demo and test on a Mac: the README says what setup.sh prints ----------------------------

def test_the_readme_says_what_setup_sh_says_of_the_demo_on_a_mac():
    mac = " ".join(_readme_mac().split())
    assert "install docker.io yourself" not in mac
    said = "the sandbox host needs a Linux machine with Docker and debootstrap"
    assert said in mac
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert "the sandbox host (demo and tests) needs a Linux machine with Docker and " \
           "debootstrap; on a Mac run ./scripts/setup.sh (the controller)" in setup
    assert "`./scripts/setup.sh` (the controller) and a GPU box" in mac


def test_a_page_whose_command_lines_end_in_comments_tells_zsh_users_what_to_do():
    """A Mac user copies lines from any page but those run in a Linux shell (the pod's
    terminal, WSL's): one whose shell lines carry `# comments` (the reference pages) says, in
    words, to `setopt interactivecomments` first."""
    linux_shell = {"quickstart-pod.md", "quickstart-wsl2.md"}
    pages = [p for p in sorted((ROOT / "docs").glob("*.md")) if p.name not in linux_shell]
    pages.append(README)
    commented = []
    for page in pages:
        text = page.read_text()
        lines = [line for t, _n, b in blocks(text) if t in ("", "sh", "bash", "shell")
                 for line in b if not line.lstrip().startswith("#")]
        if any(_comment_words(line) for line in lines):
            commented.append(page.name)
            assert "setopt interactivecomments" in " ".join(text.split()), page.name
    assert "commands.md" in commented  # the page of every command, a comment on each line
