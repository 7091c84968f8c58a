"""
beekeeper's own pyinfra operations: each reads a fact, then yields commands or a noop.
"""

from __future__ import annotations

import hashlib
import shlex
from pathlib import Path

from pyinfra import host
from pyinfra.api import StringCommand, operation
from pyinfra.facts.files import Sha256File
from pyinfra.operations import files

from facts.docker import DockerImageId

q = shlex.quote


class StreamedCommand(StringCommand):
    """A shell command whose output reaches the user's terminal as it comes, without
    pyinfra's -v: long steps print a heartbeat line (see _with_heartbeat) and nothing else."""

    def execute(self, state, host, connector_arguments):  # type: ignore[no-untyped-def]
        connector_arguments.update(self.connector_arguments)
        return host.run_shell_command(self, print_output=True,
                                      print_input=state.print_input, **connector_arguments)


def _with_heartbeat(cmd: str, log: str, what: str, every_s: int = 30) -> str:
    """Run cmd in the background with its output in `log`, printing a line every `every_s`.
    `what` and `log` reach the shell only single-quoted (they may carry host data)."""
    ql, qw = q(log), q(what)
    return (
        f"mkdir -p {q(log.rsplit('/', 1)[0])} && : > {ql} && "
        f"( {cmd} >> {ql} 2>&1; echo $? > {q(log + '.rc')} ) & pid=$!; "
        f"start=$(date +%s); while kill -0 $pid 2>/dev/null; do sleep {every_s}; "
        f"kill -0 $pid 2>/dev/null || break; "
        f"echo \"[beekeeper] \"{qw}\": $(( $(date +%s) - start )) s, "
        f"last: $(tail -n1 {ql} | cut -c1-100) (log: \"{ql}\")\"; done; "
        f"wait $pid; rc=$(cat {q(log + '.rc')}); "
        f"if [ \"$rc\" != 0 ]; then tail -n 30 {ql}; "
        f"echo {qw}\" failed (exit $rc); full log: \"{ql} >&2; exit \"$rc\"; fi"
    )


@operation()
def image_built(tag: str, dockerfile: str, context_dir: str, log_path: str):
    """
    Build a Docker image on the host, unless the tag exists.

    + tag: image tag; it encodes every build input, so an existing tag is up to date
    + dockerfile: the rendered Dockerfile on the host
    + context_dir: the build context: the server's source tree on the host
    + log_path: where the build output goes; a line every 30 s says it is alive
    """
    if host.get_fact(DockerImageId, tag=tag):
        host.noop(f"image {tag} is already built")
        return
    cmd = f"docker build --pull=false -f {q(dockerfile)} -t {q(tag)} {q(context_dir)}"
    yield StreamedCommand(_with_heartbeat(cmd, log_path, f"building {tag}"))


@operation()
def image_preloaded(image: str, local_tar: str, remote_dir: str):
    """
    Load a base image saved on the controller into the host's engine, unless present.
    For hosts that cannot pull from a registry (air-gapped hosts, the sandbox).

    + image: the image name the Dockerfile refers to
    + local_tar: `docker save` archive on the controller
    + remote_dir: folder on the host for the upload (the archive is removed after load)
    """
    if host.get_fact(DockerImageId, tag=image):
        host.noop(f"base image {image} is present")
        return
    remote = f"{remote_dir}/{image.replace('/', '_').replace(':', '_')}.tar"
    yield from files.put._inner(src=local_tar, dest=remote)
    yield StringCommand(f"docker load -i {q(remote)} && rm -f {q(remote)}")


@operation()
def model_placed(dest: str, sha256: str, local_src: str):
    """
    Place a model file from the controller, checked by sha256; skip when the file on
    the host already has the right hash. A mismatch removes the partial file and fails.

    + dest: path of the model on the host
    + sha256: expected sha256 of the file
    + local_src: the file on the controller
    """
    if host.get_fact(Sha256File, path=dest) == sha256:
        host.noop(f"{dest} has sha256 {sha256[:12]}…")
        return
    partial = dest + ".partial"
    yield from files.put._inner(src=local_src, dest=partial, mode="0644")
    yield StringCommand(
        f"if [ \"$(sha256sum {q(partial)} | cut -d' ' -f1)\" = {q(sha256)} ]; "
        f"then mv -f {q(partial)} {q(dest)}; "
        f"else rm -f {q(partial)}; echo {q(f'model sha256 mismatch for {dest}: removed')} >&2; "
        "exit 1; fi"
    )


@operation()
def model_downloaded(dest: str, sha256: str, size_bytes: int, endpoint: str, repo: str,
                     revision: str, filename: str, fetcher: str, python: str,
                     token_file: str | None = None):
    """
    Download a model from the Hugging Face Hub on the host straight to `<dest>.partial`
    (resumed after an interruption), check its sha256, then rename it into place; skip when
    the file on the host already has the right hash.

    + dest: path of the model on the host
    + sha256, size_bytes: the pinned file's hash and size (beekeeper.pins)
    + endpoint: the Hub, or a mirror of it
    + repo, revision, filename: what to download; revision is a commit
    + fetcher: path of the host-side download script
    + python: interpreter with huggingface-hub on the host
    + token_file: root-only file with a Hub token on the host, if the repo needs one
    """
    if host.get_fact(Sha256File, path=dest) == sha256:
        host.noop(f"{dest} has sha256 {sha256[:12]}…")
        return
    args = [python, fetcher, "--endpoint", endpoint, "--repo", repo, "--revision", revision,
            "--file", filename, "--dest", dest, "--sha256", sha256, "--size", str(size_bytes)]
    if token_file:
        args += ["--token-file", token_file]
    log = dest + ".download.log"
    yield StreamedCommand(_with_heartbeat(" ".join(q(a) for a in args), log,
                                        f"downloading {filename}"))


# what the manifest (deployed.json) at $1 says is serving: "<profile> on <addr>:<port>"
_SERVING = ("python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); "
            "a=m[\"bind_address\"]; a=\"[\"+a+\"]\" if \":\" in a else a; "
            "print(m[\"profile\"], \"on\", a+\":\"+str(m[\"port\"]))'")
_PORT = ("python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))[\"port\"]))'")


def serving(profile: str, bind_address: str, port: int) -> str:
    addr = f"[{bind_address}]" if ":" in bind_address else bind_address
    return f"{profile} on {addr}:{port}"


@operation()
def smoke_checked(port: int, unit: str, script: str, timeout_s: int, after_change: bool,
                  api_key_file: str | None = None, profile: str = "",
                  bind_address: str = "127.0.0.1"):
    """
    Wait for /health and smoke-check the API on the host. When nothing changed in this
    run, the check runs as a read-only fact and reports no change. The last line says
    which server is serving.

    + port: the server's port on the host
    + unit: systemd unit whose log is shown when a check fails
    + script: path of hostcheck.py on the host
    + timeout_s: deadline for /health to answer 200
    + after_change: whether an earlier operation of this run changes the service
    + profile, bind_address: what this deploy serves, for the last line
    """
    from facts.server import ServerSmoke

    now = serving(profile, bind_address, port)
    if not after_change:
        result = host.get_fact(ServerSmoke, script=script, port=port,
                               api_key_file=api_key_file)
        if result and result.get("ok"):
            host.noop(f"beekeeper: serving {now}: healthy, smoke passed "
                      f"({result.get('completion_tokens')} tokens)")
            return
    key = f" --api-key-file {q(api_key_file)}" if api_key_file else ""
    check = f"python3 {q(script)} --timeout {timeout_s}{key}"
    result_path = f"/var/lib/beekeeper/reports/{unit.removesuffix('.service')}-smoke.json"
    path = f"/etc/systemd/system/{unit}"
    manifest = f"/etc/beekeeper/{unit.removeprefix('beekeeper-').removesuffix('.service')}" \
        "/deployed.json"
    qm = q(manifest)
    compose = manifest.rsplit("/", 1)[0] + "/compose.yaml"  # runtime "compose" only
    # On failure: show the log, put the previous unit back, and prove the old server healthy
    # on the port the restored unit uses (its restored manifest says which).
    yield StreamedCommand(
        f"if {check} --port {port} --out {q(result_path)}; then "
        f"echo {q(f'beekeeper: serving {now}')}; exit 0; fi; "
        f"echo '--- last server log lines ({unit}) ---'; "
        f"journalctl -u {q(unit)} -n 30 --no-pager; "
        f"echo 'beekeeper: deploy failed: the new server did not pass /health and smoke "
        f"checks (log above)' >&2; "
        f"if [ ! -f {q(path + '.prev')} ]; then "
        f"echo 'beekeeper: no server is serving (no previous unit to restore)' >&2; exit 1; fi; "
        f"echo 'beekeeper: rolling back to the previous unit' >&2; "
        f"mv -f {q(path + '.prev')} {q(path)}; "
        f"if [ -f {q(manifest + '.prev')} ]; then mv -f {q(manifest + '.prev')} {qm}; "
        f"else rm -f {qm}; fi; "
        f"if [ -f {q(compose + '.prev')} ]; then mv -f {q(compose + '.prev')} {q(compose)}; "
        f"else rm -f {q(compose)}; fi; "
        f"systemctl daemon-reload && systemctl restart {q(unit)} || true; "
        f"if [ -f {qm} ] && prev_port=$({_PORT} {qm}) && "
        f"{check} --port \"$prev_port\" >/dev/null; then "
        f"echo 'beekeeper: rolled back; the previous server is healthy' >&2; "
        f"echo \"beekeeper: serving $({_SERVING} {qm}) (previous unit restored)\" >&2; "
        f"else echo 'beekeeper: no server is serving: the previous unit was restored but "
        f"did not pass /health' >&2; fi; exit 1"
    )


@operation()
def held(packages: list[str]):
    """
    Hold packages at their installed version (apt-mark hold), unless already held.

    + packages: package names
    """
    from facts.host import AptHolds

    missing = [p for p in packages if p not in host.get_fact(AptHolds)]
    if not missing:
        host.noop(f"{', '.join(packages)} already held")
        return
    yield "apt-mark hold " + " ".join(q(p) for p in missing)


@operation()
def secret_env_file(key_path: str, env_path: str, expected_sha1: str, var: str,
                    quoted: bool = False):
    """
    Write `VAR=<key>` to a root-only env file on the host, built there from the root-only
    key file, so the key is on no command line and in no pyinfra output.

    + key_path: root-only file on the host holding the key
    + env_path: env file to write (mode 0600)
    + expected_sha1: sha1 of the env file's wanted content (computed on the controller)
    + var: variable name, e.g. LLAMA_API_KEY
    + quoted: `VAR='<key>'`, which compose reads literally (it interpolates `$` otherwise)
    """
    from pyinfra.facts.files import Sha1File

    if host.get_fact(Sha1File, path=env_path) == expected_sha1:
        host.noop(f"{env_path} is up to date")
        return
    fmt = f"{var}='%s'\\n" if quoted else f"{var}=%s\\n"
    yield StringCommand(
        f"umask 077 && printf {q(fmt)} \"$(cat {q(key_path)})\" > {q(env_path)}.tmp && "
        f"mv -f {q(env_path)}.tmp {q(env_path)}"
    )


def sha1_text(text: str) -> str:
    """sha1 of text as pyinfra's Sha1File fact reports a file holding it."""
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


def secret_content(src: str) -> str:
    """A local secret file's text as the host gets it: stripped, as every reader of a key
    here strips it, and one newline (pyinfra's stdin ends every line with one)."""
    return Path(src).read_text().strip() + "\n"


def put_secret(name: str, src: str, dest: str):
    """Copy a local secret file to the host as a root-only file (0600). Not by pyinfra's
    upload, which first writes a file with the default mode (under sudo in /tmp, where any
    user can read it): the content goes on the stdin of `umask 077; cat`, on no command
    line and in no output."""
    return secret_file(name=name, dest=dest,
                       sha1=sha1_text(secret_content(src)),
                       _stdin=secret_content(src), _get_pty=False)  # a pty echoes stdin


@operation()
def secret_file(dest: str, sha1: str):
    """
    Write stdin to a root-only file (0600), through a root-only temporary file beside it.
    Called by `put_secret`, which gives the content as `_stdin`.

    + dest: the file on the host
    + sha1: sha1 of the wanted content (computed on the controller)
    """
    from pyinfra.facts.files import File, Sha1File

    info = host.get_fact(File, path=dest)
    if (host.get_fact(Sha1File, path=dest) == sha1 and info and info.get("mode") == 600
            and info.get("user") == "root"):
        host.noop(f"{dest} is up to date")
        return
    tmp = q(f"{dest}.tmp")
    # rm first: `cat >` into a temporary file left by an earlier run keeps that file's mode
    yield StringCommand(f"rm -f {tmp} && umask 077 && cat > {tmp} && chown root:root {tmp} && "
                        f"mv -f {tmp} {q(dest)}")


@operation()
def images_pruned(repo: str, keep: list[str], newest: int = 2):
    """
    Remove server images beyond the newest `newest` ones, never one in `keep` (the image the
    unit runs and the one its rollback copy runs).

    + repo: image repository, e.g. beekeeper/llama-server
    + keep: tags that must stay
    + newest: how many of the newest tags stay
    """
    from facts.docker import ImageTags

    tags = host.get_fact(ImageTags, repo=repo)
    stale = [t for t in tags[newest:] if t not in keep]
    if not stale:
        host.noop(f"no {repo} image beyond the newest {newest} to remove")
        return
    yield "docker rmi " + " ".join(q(t) for t in stale)


def missing_packages(specs: list[str]) -> list[str]:
    """Of `name` or `name=version` specs, those not installed (at that version)."""
    from pyinfra.facts.deb import DebPackages

    installed = host.get_fact(DebPackages) or {}
    out = []
    for spec in specs:
        name, _, version = spec.partition("=")
        if name not in installed or (version and version not in installed[name]):
            out.append(spec)
    return out
