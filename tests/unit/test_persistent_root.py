"""
A GPU pod's persistent root: the kit's folders become links into it (the fact read on a real
tree, the operation's commands run in sh on it), the end of an unsupervised server, the
start script's arguments, and the smoke gate's check of which process answers on the port.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from beekeeper.core.paths import persisted_links, start_script
from beekeeper.facts.persist import PathKinds
from beekeeper.hostside import hostcheck
from beekeeper.operations.persist import linked, unsupervised_ended
from beekeeper.tasks import supervisor

from .harness import DEFAULTS, run_queued

DATA = {**DEFAULTS, "profile": "cpu-tiny"}


def kinds_of(paths: list[str]) -> dict:
    """The PathKinds fact, its command run in sh on this machine."""
    fact = PathKinds()
    out = subprocess.run(["sh", "-c", fact.command(paths)], capture_output=True, text=True,
                         check=True).stdout
    return fact.process(out.splitlines())


def run_linked(path: Path, target: Path, keep_contents: bool = True) -> list[str]:
    """The operation prepared against the real tree's fact, then its commands run in sh."""
    facts = {"PathKinds": kinds_of([str(path)])}
    ops = run_queued(lambda cfg: linked(name="link", path=str(path), target=str(target),
                                        keep_contents=keep_contents),
                     DATA, facts)
    cmds = [c for _, cs in ops for c in cs]
    for c in cmds:
        subprocess.run(["sh", "-c", c], check=True)
    return cmds


def test_the_fact_tells_links_folders_files_and_missing_paths(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_text("x")
    (tmp_path / "l").symlink_to(tmp_path / "d")
    got = kinds_of([str(tmp_path / n) for n in ("d", "f", "l", "gone")])
    assert {Path(p).name: (k.kind, k.target) for p, k in got.items()} == {
        "d": ("dir", ""), "f": ("file", ""), "l": ("link", str(tmp_path / "d")),
        "gone": ("missing", "")}


def test_a_kit_folder_there_moves_onto_the_root_and_becomes_its_link(tmp_path):
    kit = tmp_path / "opt-beekeeper"
    (kit / "llama-server" / "b1").mkdir(parents=True)
    (kit / "llama-server" / "b1" / "llama-server").write_text("binary")
    target = tmp_path / "workspace" / "beekeeper" / "opt"
    run_linked(kit, target)
    assert kit.is_symlink() and os.readlink(kit) == str(target)
    assert (target / "llama-server" / "b1" / "llama-server").read_text() == "binary"
    assert run_linked(kit, target) == []  # a second run: no change


def test_a_missing_folder_links_to_the_roots_folder_kept_from_before(tmp_path):
    """After a pod's restart, the root's folder is there and the link is not."""
    target = tmp_path / "root" / "etc"
    (target / "llm").mkdir(parents=True)
    kit = tmp_path / "etc-beekeeper"
    run_linked(kit, target)
    assert os.readlink(kit) == str(target) and (kit / "llm").is_dir()


def test_a_first_deploy_makes_the_roots_folder_behind_the_link(tmp_path):
    kit = tmp_path / "srv-beekeeper"
    target = tmp_path / "root" / "srv"
    run_linked(kit, target)
    assert os.readlink(kit) == str(target) and target.is_dir()
    (kit / "models").mkdir()  # what the next operation does through the link
    assert (target / "models").is_dir()


def test_an_earlier_kits_launcher_file_is_replaced_by_the_link(tmp_path):
    old = tmp_path / "beekeeper-supervisord"
    old.write_text("#!/bin/sh\nold\n")
    new = tmp_path / "bin" / "beekeeper-supervisord"
    new.parent.mkdir()
    new.write_text("#!/bin/sh\nnew\n")
    run_linked(old, new, keep_contents=False)
    assert old.is_symlink() and old.read_text() == "#!/bin/sh\nnew\n"


def test_a_launcher_link_is_made_where_there_was_none(tmp_path):
    target = tmp_path / "bin" / "beekeeper-supervisorctl"
    target.parent.mkdir()
    target.write_text("#!/bin/sh\n")
    link = tmp_path / "sbin" / "beekeeper-supervisorctl"
    run_linked(link, target, keep_contents=False)
    assert link.is_symlink() and target.is_file()


def test_a_file_where_a_kit_folder_belongs_is_refused(tmp_path):
    (tmp_path / "opt-beekeeper").write_text("not the kit's")
    with pytest.raises(Exception, match="is a file, not the kit's"):
        run_linked(tmp_path / "opt-beekeeper", tmp_path / "root" / "opt")


def test_a_process_that_is_not_a_server_of_the_kits_is_left_running():
    """pid reuse, or a process preflight named that is no longer the kit's: never killed."""
    p = subprocess.Popen(["sleep", "30"])
    try:
        ops = run_queued(lambda cfg: unsupervised_ended(name="end", pids=[p.pid]),
                         DATA, {})
        out = subprocess.run(["sh", "-c", ops[0][1][0]], capture_output=True, text=True)
        assert "left alone" in out.stdout and p.poll() is None
    finally:
        p.kill()
        p.wait()


def test_no_unsupervised_server_is_no_change():
    ops = run_queued(lambda cfg: unsupervised_ended(name="end", pids=[]),
                     DATA, {})
    assert ops[0][1] == []


def test_the_start_script_parses_and_refuses_an_unknown_argument_before_anything(tmp_path):
    root = "/workspace/beekeeper"
    text = supervisor.start(root, "/usr/bin/python3")
    script = tmp_path / "start"
    script.write_text(text)
    assert subprocess.run(["sh", "-n", str(script)]).returncode == 0
    bad = subprocess.run(["sh", str(script), "--bogus"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown argument '--bogus'" in bad.stderr
    # each kit folder is linked back into the root, and its user made again with its ids
    for path, target in persisted_links(root):
        assert f"link {path} {target}" in text
    assert "useradd -r -u \"$uid\"" in text and start_script(root) == f"{root}/start"


def listen(port: int = 0) -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


def test_the_listener_on_a_port_is_found_in_proc():
    with listen() as s:
        port = s.getsockname()[1]
        assert hostcheck.listeners(port) == ({os.getpid()}, True)
    assert hostcheck.listeners(port) == (set(), True)  # closed


def fake_ctl(tmp_path: Path, pid: int) -> str:
    """A stand-in for supervisorctl's `pid PROGRAM` answer (the real one: test_pod.py)."""
    ctl = tmp_path / "ctl"
    ctl.write_text(f"#!/bin/sh\necho {pid}\n")
    ctl.chmod(0o755)
    return str(ctl)


def test_the_gate_passes_only_for_the_process_the_runtime_started(tmp_path):
    other = subprocess.Popen([sys.executable, "-c", "import socket, time; s = socket.socket(); "
                              "s.bind(('127.0.0.1', 0)); s.listen(); print(s.getsockname()[1], "
                              "flush=True); time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    try:
        port = int(other.stdout.readline())  # type: ignore[union-attr]
        ours = hostcheck.answering_is_ours(port, program="beekeeper-llm",
                                           ctl=fake_ctl(tmp_path, other.pid))
        assert ours is None
        theirs = hostcheck.answering_is_ours(port, program="beekeeper-llm",
                                             ctl=fake_ctl(tmp_path, 999999))
        assert theirs is not None and f"pid {other.pid}" in theirs
        assert "not held by beekeeper-llm's server (pid 999999) alone" in theirs
        # systemd: the listener is not in the unit's cgroup
        unit = hostcheck.answering_is_ours(port, unit="beekeeper-llm.service")
        assert unit is not None and "not held by a process of beekeeper-llm.service" in unit
    finally:
        other.kill()
        other.wait()


def test_a_server_listing_another_model_fails_the_smoke_check():
    """What answers may be a server of an earlier deploy: /v1/models must name this one."""
    import http.server
    import json
    import threading

    class Models(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            body = json.dumps({"data": [{"id": "left-over"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Models)
    t = threading.Thread(target=server.handle_request, daemon=True)
    t.start()
    try:
        with pytest.raises(RuntimeError, match="names 'left-over', not the deployed model "
                                               "'cpu-tiny'"):
            hostcheck.smoke(f"http://127.0.0.1:{server.server_address[1]}", None, "cpu-tiny")
    finally:
        t.join(10)
        server.server_close()


def test_a_kit_folder_that_is_a_link_to_the_root_is_taken_as_there(tmp_path):
    """pyinfra's files.directory refuses a link where a folder is asked: the kit's own
    folders (the log folder, the host-side scripts') go through kit_folder, which takes the
    persistent root's link as the folder (a pod's deploy stopped on /var/log/beekeeper)."""
    from beekeeper.operations.persist import kit_folder

    target = tmp_path / "root" / "log"
    target.mkdir(parents=True)
    link = tmp_path / "log-beekeeper"
    link.symlink_to(target)
    missing = tmp_path / "lib-beekeeper"
    for path, want in ((link, []), (missing, None)):
        ops = run_queued(lambda cfg, p=path: kit_folder(name="dir", path=str(p)), DATA,
                         {"PathKinds": kinds_of([str(path)])})
        cmds = ops[0][1]
        if want is not None:
            assert cmds == want
        for c in cmds:
            subprocess.run(["sh", "-c", c], check=True)
    assert missing.is_dir() and oct(missing.stat().st_mode & 0o777) == "0o755"


NO_PTRACE = ["setpriv", "--bounding-set=-sys_ptrace", "--"]  # a container root's view


def as_nobody_listening() -> tuple[subprocess.Popen, int]:
    srv = subprocess.Popen(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--",
         sys.executable, "-c", "import socket, time; s = socket.socket(); "
         "s.bind(('127.0.0.1', 0)); s.listen(); print(s.getsockname()[1], flush=True); "
         "time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    return srv, int(srv.stdout.readline())  # type: ignore[union-attr]


def _can_drop_ptrace() -> bool:
    """Root, and allowed to drop a capability from the bounding set (CAP_SETPCAP)."""
    if os.geteuid() != 0:
        return False
    return subprocess.run([*NO_PTRACE, "true"], capture_output=True).returncode == 0


needs_root = pytest.mark.skipif(not _can_drop_ptrace(),
                                reason="needs root that may drop sys_ptrace (setpriv)")


@needs_root
def test_the_ports_holder_is_found_where_its_fds_are_hidden(alone_as_nobody):
    """RunPod's and Docker's default root has no CAP_SYS_PTRACE: another user's fds and exe
    are hidden. The fact then takes every process of the socket's user, and the program
    from its command line (the pod test's first deploys found no holder at all)."""
    from beekeeper.facts.host import PortOwners

    srv, port = as_nobody_listening()
    try:
        fact = PortOwners()
        cmd = fact.command(port=port, pidfile="/nonexistent", native_prefix="/nonexistent")
        for pre, guess in (([], False), (NO_PTRACE, True)):
            out = subprocess.run([*pre, "sh", "-c", cmd], capture_output=True, text=True)
            owners = fact.process(out.stdout.splitlines()).owners
            assert [(o.pid, o.user) for o in owners] == [(srv.pid, "nobody")], out.stdout
            assert owners[0].exe.endswith(("python", "python3")) or "python" in owners[0].exe
            assert ("guess=uid" in out.stdout) == guess
    finally:
        srv.kill()
        srv.wait()


@needs_root
def test_the_gate_tells_the_holder_by_its_user_where_its_fds_are_hidden(tmp_path,
                                                                      alone_as_nobody):
    srv, port = as_nobody_listening()
    try:
        code = ("import sys; from beekeeper.hostside import hostcheck as h; "
                f"print(h.answering_is_ours({port}, program='p', ctl=sys.argv[1]))")
        for pid, ok in ((srv.pid, True), (999999, False)):
            out = subprocess.run([*NO_PTRACE, sys.executable, "-c", code,
                                  fake_ctl(tmp_path, pid)], capture_output=True, text=True)
            said = out.stdout.strip()
            assert (said == "None") == ok, out.stdout + out.stderr
            if not ok:
                assert "the processes of the socket's user" in said
    finally:
        srv.kill()
        srv.wait()


def test_the_pods_own_start_command_runs_even_when_the_kits_services_cannot_start(
        alone_as_nobody):
    """RunPod's form, `start -- /start.sh`: the provider's own start (its SSH) must run
    whatever happens to the kit's services. Here they cannot start (not root)."""
    text = supervisor.start("/workspace/beekeeper", "/usr/bin/python3")
    drop = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"] \
        if os.geteuid() == 0 else []
    out = subprocess.run([*drop, "sh", "-s", "--", "--", "echo", "the pod's own start"],
                         input=text, capture_output=True, text=True, cwd="/")
    assert out.stdout == "the pod's own start\n", out.stderr
    assert "run as root" in out.stderr and "running echo anyway" in out.stderr
    alone = subprocess.run([*drop, "sh", "-s"], input=text, capture_output=True, text=True,
                           cwd="/")
    assert alone.returncode == 1  # with no command to run after it, the failure is its exit


@pytest.mark.parametrize("name", ["workspace/beekeeper", "work space/bee's keeper"])
def test_the_runpod_start_line_runs_the_pods_own_start_where_the_kits_script_is_not_there(
        tmp_path, capsys, name):
    """The RunPod line preflight gives (`bash -c '<start script> -- /start.sh'`) is the pod's
    whole start command: where the kit's start script is not there, the pod's own start (its
    SSH and Jupyter) must still run. It is not there after a restart of a pod with no
    persistent root (the container disk, /usr/local/sbin with it, is cleared), after a first
    deploy that stopped before the service stage wrote it (the line is told at preflight),
    and after the uninstall (it removes the script, not the pod's start command)."""
    import re
    import shlex

    from beekeeper.facts.host import InitInfo
    from beekeeper.tasks import preflight

    from .harness import on_host

    root = tmp_path / name  # the volume kept, the kit's script not there (a name a shell splits)
    with on_host():
        preflight.warn_supervisor_restart(InitInfo(pid1="process_api", systemd=False,
                                                   state=""), str(root))
    found = re.search(r"RunPod: `(bash -c [^`]*)`", capsys.readouterr().err)
    assert found, "preflight gives no RunPod line"
    own = tmp_path / "start.sh"  # RunPod's /start.sh: its SSH, its Jupyter
    own.write_text("#!/bin/sh\necho \"the pod's own start\"\n")
    own.chmod(0o755)
    line = shlex.split(found.group(1).replace(" /start.sh", f" {own}"))
    out = subprocess.run(line, capture_output=True, text=True, cwd="/")
    assert out.stdout == "the pod's own start\n", (found.group(1), out.stderr)
    # the kit's script there: it runs, and the pod's own start once after it, in its place
    # (exec: one process), once even where it fails
    root.mkdir(parents=True)
    (root / "start").write_text('#!/bin/sh\necho kit; shift; exec "$@"\n')
    (root / "start").chmod(0o755)
    own.write_text("#!/bin/sh\necho \"the pod's own start\"\nexit 1\n")
    out = subprocess.run(line, capture_output=True, text=True, cwd="/")
    assert out.stdout == "kit\nthe pod's own start\n", (found.group(1), out.stderr)


def _wsl_conf_value(raw: str) -> str | None:
    """A stand-in for WSL's own wsl.conf reader (a port of the value loop of microsoft/WSL's
    src/shared/configfile/configfile.cpp, not WSL itself): an unescaped `"` toggles quoting
    and is dropped, `\\` escapes `\\` `"` b n t (another escape drops the line: None), `#`
    outside quotes starts a comment."""
    out, quoted, i = [], False, 0
    while i < len(raw):
        c = raw[i]
        if c == '"':
            quoted = not quoted
        elif c == "\\":
            i += 1
            if i == len(raw) or raw[i] not in '\\"bnt':
                return None
            out.append({"b": "\b", "n": "\n", "t": "\t"}.get(raw[i], raw[i]))
        elif c == "#" and not quoted:
            break
        else:
            out.append(c)
        i += 1
    return None if quoted else "".join(out).rstrip(" \t")


def _cron_command(raw: str) -> str:
    """A stand-in for cron's reading of a crontab command (crontab(5)): `\\%` is a `%`, an
    unescaped `%` ends the command (what follows is its stdin)."""
    return re.split(r"(?<!\\)%", raw)[0].replace("\\%", "%")


@pytest.mark.parametrize("name", ["bee's $(echo run) keeper", 'back\\slash "dq" #1 50%'])
def test_the_boot_and_crontab_lines_and_the_missing_owner_line_carry_a_root_a_shell_splits(
        tmp_path, capsys, name):
    """A persistent root whose name holds a space, quotes, `$(...)`, `\\`, `#` or `%`: WSL's
    `[boot]` command as preflight words it, read as wsl.conf is read (a stand-in port of
    WSL's reader) and then by sh, runs the kit's script; so does root's crontab line as cron
    reads it (a stand-in); the start script's line for a lost owner mark names the folder as
    it is (nothing in it run)."""
    from beekeeper.facts.host import InitInfo
    from beekeeper.tasks import preflight

    from .harness import on_host

    root = tmp_path / "work space" / name
    root.mkdir(parents=True)
    (root / "start").write_text("#!/bin/sh\necho kit\n")
    (root / "start").chmod(0o755)
    with on_host():
        preflight.warn_supervisor_restart(InitInfo(pid1="init", systemd=False, state=""),
                                          str(root), wsl2=True)
        preflight.warn_supervisor_restart(InitInfo(pid1="systemd", systemd=True, state=""),
                                          str(root))
    err = capsys.readouterr().err
    boot = re.search(r"add `command = (.*?)` under `\[boot\]`", err)
    cron = re.search(r"`@reboot (.*?)` in root's crontab", err)
    assert boot and cron, err
    for line in (_wsl_conf_value(boot.group(1)), _cron_command(cron.group(1))):
        assert line is not None, boot.group(1)
        out = subprocess.run(["sh", "-c", line], capture_output=True, text=True, cwd="/")
        assert out.stdout == "kit\n", (line, out.stderr)
    text = supervisor.start(str(root), sys.executable)
    line = next(x for x in text.splitlines() if "is missing: deploy again" in x).strip()
    probe = f"say() {{ echo \"$*\"; }}\nf() {{\n{line}\n}}\nf\necho \"rc=$?\"\n"
    out = subprocess.run(["sh", "-c", probe], capture_output=True, text=True, cwd="/")
    assert out.stdout == f"{root}/owner is missing: deploy again\nrc=1\n", out.stderr


POD_ROOT, MINE = "/workspace/beekeeper", "/srv/beekeeper/models/my-finetune-Q8_0.gguf"


def _pod_uninstall(yours: bool, kinds: Any = None, present: Any = None,
                   models_at: str = "/srv/beekeeper/models", restarted: bool = False,
                   **data: Any) -> set[str]:
    """What the uninstall on a pod's root removes (`rm -rf` paths), the kit's folders linked
    into it, the service deployed with your model (`yours`) or the profile's."""
    import shlex

    from beekeeper.core.deployed import DeployedService
    from beekeeper.core.paths import PERSISTED, ServicePaths
    from beekeeper.facts.persist import PathKind

    from .harness import deployed_host

    model = MINE if yours else "/srv/beekeeper/models/gemma-3-270m-it-Q4_K_M.gguf"
    manifest = DeployedService(service="llm", image="/opt/beekeeper/llama-server/b/llama-server",
                               model_path=model, model_is_users=yours, runtime="supervisor",
                               mode="native").to_json()
    from .harness import PROCESS_API

    facts = deployed_host(
        # after a restart the record's link is gone with the others: no record is read
        FileContents=lambda path: manifest.splitlines()
        if path == ServicePaths("llm").manifest and not restarted else None,
        InitSystem=PROCESS_API,
        PathKinds=kinds or (lambda paths=(), **_: {p: PathKind("link", f"{POD_ROOT}/{n}")
                                                   for p, n in PERSISTED if p in paths}),
        PresentPaths=present or (lambda paths: {p: 1024 for p in paths}),
        FileSizes=lambda path: {model.rsplit("/", 1)[1]: 9 * 2**30}
        if path == models_at else {},
        ImageTags=[], SupervisorPrograms={"beekeeper-llm": "RUNNING"})
    own = {"model_host_path": MINE, "model_sha256": "ab" * 32} if yours else {}
    ops = run_queued(None, {**DATA, "mode": "native", **own, **data}, facts)
    _POD_COMMANDS[:] = [c for _, cmds in ops for c in cmds]
    return {p for c in _POD_COMMANDS if c.startswith("rm -rf ")
            for p in shlex.split(c.split(" && ")[0])[2:]}


_POD_COMMANDS: list[str] = []  # every command of the last _pod_uninstall


def test_the_uninstall_on_a_pods_root_keeps_a_model_of_yours_in_model_dir():
    """A GGUF of yours served where it is (`model_host_path`) is never removed by the kit,
    the uninstall's own promise, which it keeps in model_dir on a host without a persistent
    root. On a pod's root, model_dir (/srv/beekeeper/models) is a folder on the volume: the
    uninstall must not take your file in it along with the kit's folders; the rest of the
    kit's root goes (its other folders and their links, the start script, the user's mark)."""
    from beekeeper.core.paths import PERSISTED, SRV_ROOT

    gone = _pod_uninstall(yours=True)
    on_volume = f"{POD_ROOT}/srv/models/my-finetune-Q8_0.gguf"

    def under(f: str, p: str) -> bool:
        return f == p or f.startswith(p.rstrip("/") + "/")
    links = {path for path, _ in PERSISTED}  # `rm -rf` of a link takes the link alone
    taken = [p for p in gone if under(on_volume, p) or (p not in links and under(MINE, p))]
    assert not taken, taken
    for path, name in PERSISTED:
        if path != SRV_ROOT:  # model_dir's folder, which holds yours, stays
            assert {path, f"{POD_ROOT}/{name}"} <= gone, (path, sorted(gone))
    assert {f"{POD_ROOT}/start", f"{POD_ROOT}/owner"} <= gone, sorted(gone)


def test_the_uninstall_on_a_pods_root_never_removes_the_models_folder_whole():
    """The models' folder on the volume may hold files of yours no inventory names (a GGUF
    you copied there, one served two deploys ago): models() removes the kit's models in it,
    then the folder goes only once empty (rmdir), its link only once the folder is gone, the
    root only once empty; with keep_models none of them."""
    from beekeeper.core.paths import PERSISTED, SRV_ROOT

    srv = {SRV_ROOT, f"{POD_ROOT}/srv", f"{POD_ROOT}/srv/models"}
    others = {p for path, name in PERSISTED if path != SRV_ROOT
              for p in (path, f"{POD_ROOT}/{name}")}
    gone = _pod_uninstall(yours=False)
    assert others <= gone and not srv & gone, sorted(gone)
    assert any(c.startswith("rm ") and "/srv/beekeeper/models/gemma-3-270m-it-Q4_K_M.gguf" in c
               for c in _POD_COMMANDS), _POD_COMMANDS  # the kit's model, by name
    cmds = "\n".join(_POD_COMMANDS)
    assert f"rmdir {POD_ROOT}/srv/models 2>/dev/null ; rmdir {POD_ROOT}/srv 2>/dev/null" in cmds
    assert f"[ -e {SRV_ROOT} ] || rm -f {SRV_ROOT}" in cmds
    # the folder, then its link, then the root (the last rmdir of it)
    assert cmds.index(f"rmdir {POD_ROOT}/srv ") < cmds.index(f"[ -e {SRV_ROOT} ]") < cmds.rindex(
        f"rmdir {POD_ROOT} 2>/dev/null"), cmds
    kept = _pod_uninstall(yours=False, keep_models=True)
    assert others <= kept and not srv & kept, sorted(kept)
    assert SRV_ROOT not in "\n".join(c for c in _POD_COMMANDS if "rmdir" in c or "[ -e" in c)


def test_the_uninstall_after_a_pods_restart_finds_the_root_by_its_marks():
    """A pod restarted before its start command was set: the container's disk is new, so the
    kit's links (/opt/beekeeper, /srv/beekeeper, ...) are gone, and the uninstall, which
    found the root through them, left all of it on the paid volume (the build, the logs, the
    kit's model and an executable start script). The root host data names (here the
    default, /workspace/beekeeper) is found by its marks and removed as its links would say;
    the kit's model goes from where it is now."""
    from beekeeper.core.paths import PERSISTED
    from beekeeper.facts.persist import PathKind

    links = {path for path, _ in PERSISTED}

    def kinds(paths=(), **_):
        return {p: PathKind("missing" if p in links else "dir", "") for p in paths}

    gone = _pod_uninstall(yours=False, kinds=kinds, models_at=f"{POD_ROOT}/srv/models",
                          restarted=True)
    for _, name in PERSISTED:
        if name != "srv":
            assert f"{POD_ROOT}/{name}" in gone, (name, sorted(gone))
    assert {f"{POD_ROOT}/start", f"{POD_ROOT}/owner"} <= gone, sorted(gone)
    cmds = "\n".join(_POD_COMMANDS)
    # the kit's model by the inventory's name for it (no record to read after the restart)
    assert f"rm -rf {POD_ROOT}/srv/models/gemma-3-270m-q4_k_m.gguf " in cmds, cmds
    assert f"rmdir {POD_ROOT}/srv/models 2>/dev/null ; rmdir {POD_ROOT}/srv 2>/dev/null" in cmds
    assert f"rmdir {POD_ROOT} 2>/dev/null" in cmds
    # no root of this inventory's there: no marks, or no record of its services on the root
    # (another container's kit on a shared volume, say): nothing of /workspace is touched
    for present in ({}, {f"{POD_ROOT}/start": 1, f"{POD_ROOT}/owner": 1}):
        _pod_uninstall(yours=False, kinds=kinds,
                       present=lambda paths, p=present: {k: v for k, v in p.items()
                                                         if k in paths},
                       models_at=f"{POD_ROOT}/srv/models", restarted=True)
        assert POD_ROOT not in "\n".join(_POD_COMMANDS)


def test_a_model_dir_deeper_on_the_pods_root_goes_folder_by_folder_once_empty():
    from beekeeper.core.paths import SRV_ROOT

    _pod_uninstall(yours=False, model_dir="/srv/beekeeper/models/llm")
    cmds = "\n".join(_POD_COMMANDS)
    assert (f"rmdir {POD_ROOT}/srv/models/llm 2>/dev/null ; rmdir {POD_ROOT}/srv/models "
            f"2>/dev/null ; rmdir {POD_ROOT}/srv 2>/dev/null") in cmds, cmds
    assert f"[ -e {SRV_ROOT} ] || rm -f {SRV_ROOT}" in cmds


def test_a_link_of_yours_at_srv_beekeeper_outside_a_pod_is_left_alone():
    """No persistent root here: /srv/beekeeper is your link to a bigger disk (/data/bk), no
    other folder of the kit links beside it and no start script or mark is there. The kit
    removes its models in it, never the folder, the link or /data."""
    from beekeeper.core.paths import SRV_ROOT
    from beekeeper.facts.persist import PathKind

    def kinds(paths=(), **_):
        return {SRV_ROOT: PathKind("link", "/data/bk")} if SRV_ROOT in paths else {}

    def present(paths):
        return {p: 1024 for p in paths if not p.startswith("/data/")}

    gone = _pod_uninstall(yours=False, kinds=kinds, present=present)
    cmds = "\n".join(_POD_COMMANDS)
    assert not [p for p in gone if p.startswith(("/data", SRV_ROOT + "/..", "/srv/beekeeper "))]
    assert "/data" not in cmds and f"[ -e {SRV_ROOT} ]" not in cmds, cmds
