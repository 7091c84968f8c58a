"""Two inventory hosts on one machine (one per model: tasks/prune.py keeps each one's
services from the other's deploy) that run different native builds: a CUDA model and a CPU
one give two builds of one source.ref. The upgrade cleanup of one host must not remove the
build the other host's service runs once this deploy is done.

pyinfra runs each operation on every host before the next one, in the order of the lines
that queue them (deploy.py): both hosts' builds and services come before either host's
cleanup, which reads the build folder again when it runs. The kit's folders are real folders
under tmp_path (as in test_lifecycle.py); the manifests are the record's own text."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from beekeeper.core.deployed import DeployedService
from beekeeper.core.machines import kept_by_neighbours, neighbours
from beekeeper.core.paths import ServicePaths, prev
from beekeeper.facts.lifecycle import FolderEntries
from beekeeper.tasks import prune

from .harness import DEFAULTS, REF_A, REF_B, REF_C, SLUG, run_queued

LLM, LLM2 = ServicePaths("llm"), ServicePaths("llm2")
# the other host's build of each ref: its CUDA variant (this host's are SLUG's, the CPU one)
CUDA = {r: f"{r[:12]}-cuda-12.8-sm89-{r[:8]}" for r in (REF_A, REF_B, REF_C)}


def sh(command: str) -> list[str]:
    return subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True,
                          check=True, timeout=30).stdout.splitlines()


@pytest.fixture
def native(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "opt/beekeeper/llama-server"
    monkeypatch.setattr(prune, "NATIVE_PREFIX", str(folder))
    return folder


def build(native: Path, slug: str) -> str:
    (native / slug).mkdir(parents=True, exist_ok=True)
    (native / slug / "llama-server").write_bytes(b"\0" * 2**20)
    return f"{native}/{slug}/llama-server"


def machine_facts(root: Path, etc: dict[str, str]) -> dict[str, Any]:
    def entries(path: str):
        return FolderEntries().process(sh(FolderEntries().command(path=path))) \
            if path.startswith(str(root)) else []

    def present(paths: list[str]):
        return {p: 4 for p in paths if p in etc}

    return {"FolderEntries": entries, "PresentPaths": present,
            "FileContents": lambda path: etc[path].splitlines() if path in etc else None,
            "DeployedServices": ["llm", "llm2"]}


def test_the_cleanup_keeps_the_build_a_neighbour_deploys_in_the_same_run(native, tmp_path):
    """Both hosts upgrade source.ref from B to C. Before the run: llm (this host) runs its B
    build, A its rollback; llm2 (the other host) its B build, A its rollback. In the run the
    other host builds C and its service starts on it; this host's cleanup, planned before,
    runs after that, and must leave llm2's new build (its running binary) in place."""
    binary = {(h, r): build(native, (SLUG if h == "one" else CUDA)[r])
              for h in ("one", "two") for r in (REF_A, REF_B)}
    mine = build(native, SLUG[REF_C])  # this host's build of C (its native task's)
    etc = {LLM.unit: "[Service]\n", prev(LLM.unit): "[Service]\n",
           LLM2.unit: "[Service]\n", prev(LLM2.unit): "[Service]\n"}
    for name, host in (("llm", "one"), ("llm2", "two")):
        p = ServicePaths(name)
        etc[p.manifest] = DeployedService(service=name, image=binary[host, REF_B]).to_json()
        etc[prev(p.manifest)] = DeployedService(service=name,
                                                image=binary[host, REF_A]).to_json()
    data = {**DEFAULTS, "ssh_hostname": "10.0.0.5", "mode": "native",
            "state_dir": str(tmp_path / "var/lib/beekeeper"),
            "services": [{"service_name": "llm", "profile": "cpu-tiny"}],
            "source": {"git": "https://example.org/beellama.cpp", "ref": REF_C}}
    two = {**data, "services": [{"service_name": "llm2", "profile": "cpu-tiny", "port": 8085}]}
    hosts = [("one", data), ("two", two)]
    theirs: list[str] = []

    def deploy(cfg):
        # as deploy.py queues it: what the other host keeps, and its configuration
        prune.ensure(cfg, "after", mine, kept_by_neighbours("one", hosts),
                     neighbours("one", hosts) or [])
        # the other host's build and service steps, which run before this step does
        theirs.append(build(native, CUDA[REF_C]))
        etc[prev(LLM2.manifest)] = etc[LLM2.manifest]
        etc[LLM2.manifest] = DeployedService(service="llm2", image=theirs[0]).to_json()

    ops = run_queued(deploy, data, machine_facts(tmp_path, etc))
    for name, cmds in ops:
        if "no rollback needs" in name:
            for c in cmds:
                assert "rm -rf " + str(tmp_path) in c, c
                sh(c)
    left = sorted(p.name for p in native.iterdir())
    assert CUDA[REF_C] in left, left  # llm2's running binary
    assert CUDA[REF_B] in left and SLUG[REF_B] in left and SLUG[REF_C] in left, left


def test_deploy_py_keeps_each_neighbours_build_through_the_others_cleanup():
    """The same through deploy.py, two native inventory hosts on one machine building from
    two refs: llm (host `one`) ran its B build (A its rollback) and moves to C; llm2 (host
    `two`) ran its B build and moves to D, built by an earlier run that stopped before its
    service. Neither host's cleanup may name the build the other one starts in this run."""
    import re

    from beekeeper.facts.lifecycle import FolderEntry

    from .harness import CPU_HOST, facts, run_deploy_hosts_stdin

    refs = {"one": REF_C, "two": "d" * 40}

    def data(name: str, port: int, ref: str) -> dict[str, Any]:
        return {**DEFAULTS, "ssh_hostname": "10.0.0.5", "mode": "native",
                "services": [{"service_name": name, "profile": "cpu-tiny", "port": port}],
                "source": {"git": "https://example.org/beellama.cpp", "ref": ref}}

    hosts = {"one": data("llm", 8083, refs["one"]), "two": data("llm2", 8085, refs["two"])}

    def built(ops) -> dict[str, str]:  # each host's build of this run, by the step's name
        return {h: next(m.group(1) for n, _, _ in o
                        if (m := re.match(r"Build llama-server (\S+) natively", n)))
                for h, o in ops.items()}

    _, first = run_deploy_hosts_stdin({h: (d, facts(**CPU_HOST)) for h, d in hosts.items()})
    new = built(first)
    old = {(h, r): f"{r[:12]}-cpu-x86-64-v3-{h}0000" for h in ("one", "two")
           for r in (REF_A, REF_B)}
    prefix = "/opt/beekeeper/llama-server"
    runs = {LLM.manifest: old["one", REF_B], prev(LLM.manifest): old["one", REF_A],
            LLM2.manifest: old["two", REF_B]}
    etc = {p: DeployedService(service=p.split("/")[3], port=8083,
                              image=f"{prefix}/{slug}/llama-server").to_json()
           for p, slug in runs.items()}
    listing = [FolderEntry(name=n, kind="d", size_kib=1024)
               for n in sorted([*old.values(), new["one"], new["two"]])]
    machine = facts(**CPU_HOST, DeployedServices=["llm", "llm2"],
                    FileContents=lambda path: etc[path].splitlines() if path in etc else None,
                    PresentPaths=lambda paths: {p: 4 for p in paths if p == prev(LLM.unit)},
                    FolderEntries=lambda path: listing if path == prefix else [])
    failed, ops = run_deploy_hosts_stdin({h: (d, machine) for h, d in hosts.items()})
    assert failed == set() and built(ops) == new
    for h, other in (("one", "two"), ("two", "one")):
        cleanup = [c for n, cs, _ in ops[h] if n.startswith("Remove native builds no rollback")
                   for c in cs]
        assert not any(new[other] in c for c in cleanup), (h, cleanup)
    # and what each needs itself still goes: llm's A build, no longer its rollback
    assert any(old["one", REF_A] in c for n, cs, _ in ops["one"]
               if n.startswith("Remove native builds no rollback") for c in cs)
