"""
A host's life after the first deploy (issue 26): the upgrade cleanup keeps what a rollback
needs and removes the rest, saying the disk it freed.

The kit's folders are real folders under tmp_path (state_dir points there, and the native
prefix is moved there): the fact commands run on them for real, and so do the removal
commands the operations queue, so a second run reads what the first one left. The
manifests and the `.prev` unit (under /etc) are written by hand, as tasks/service.py writes
them (only the keys the cleanup reads).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from pyinfra.api import Config, Inventory, State
from pyinfra.context import ctx_host, ctx_state

from beekeeper.core.config import load_host_config
from beekeeper.core.paths import ServicePaths, prev
from beekeeper.facts.lifecycle import FolderEntries, PresentPaths
from beekeeper.tasks import prune

from .harness import BUILTIN_DEFAULTS, _show
from .test_gpu_hosts import DEFAULTS

REF_A, REF_B, REF_C = ("a" * 40), ("b" * 40), ("c" * 40)
VARIANT = "cpu-x86-64-v3"
SLUG = {r: f"{r[:12]}-{VARIANT}-{r[:8]}" for r in (REF_A, REF_B, REF_C)}
LLM = ServicePaths("llm")


def run_queued(fn, data: dict[str, Any], facts: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """As harness.run_deploy, for one task function `fn(cfg)` instead of deploy.py."""
    inventory = Inventory(([("canned", data)], {}))
    state = State(inventory, Config())
    host = inventory.get_host("canned")
    host.connected = True
    values = {**BUILTIN_DEFAULTS, **facts}

    def get_fact(cls, *args, **kwargs):
        v = values[cls.__name__]
        return v(**kwargs) if callable(v) else v

    with ctx_state.use(state), ctx_host.use(host), \
            mock.patch.object(host, "get_fact", side_effect=get_fact):
        fn(load_host_config(data))
        out = []
        for op_hash in state.get_op_order():
            names = state.get_op_meta(op_hash).names
            op_data = state.get_op_data_for_host(host, op_hash)
            out.append((next(iter(names)), [_show(c) for c in op_data.command_generator()]))
    return out


def sh(command: str) -> list[str]:
    return subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True,
                          check=True, timeout=30).stdout.splitlines()


class Machine:
    """The kit's folders under `root` (real), and hand-written files under /etc."""

    def __init__(self, root: Path):
        self.root = root
        self.state_dir = root / "var/lib/beekeeper"
        self.native = root / "opt/beekeeper/llama-server"
        self.etc: dict[str, str] = {}

    def build(self, ref: str, mib: int) -> str:
        """A native build of `ref` (`mib` MiB), its source tree and cmake tree; returns
        the binary a unit runs."""
        slug = SLUG[ref]
        for folder, size in ((self.native / slug, mib), (self.state_dir / "src" / ref, 1),
                             (self.state_dir / "native" / slug / "build", 1)):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "blob").write_bytes(b"\0" * size * 2**20)
        return f"{self.native}/{slug}/llama-server"

    def runs(self, image: str, before: str | None = None) -> None:
        """The llm unit runs `image`; its previous unit (if any) `before`."""
        self.etc = {LLM.manifest: json.dumps({"service": "llm", "image": image}),
                    LLM.unit: "[Service]\n"}
        if before:
            self.etc[prev(LLM.manifest)] = json.dumps({"service": "llm", "image": before})
            self.etc[prev(LLM.unit)] = "[Service]\n"

    def facts(self) -> dict[str, Any]:
        def entries(path: str):
            assert path.startswith(str(self.root)), path
            return FolderEntries().process(sh(FolderEntries().command(path=path)))

        def present(paths: list[str]):
            real = [p for p in paths if p.startswith(str(self.root))]
            found = PresentPaths().process(sh(PresentPaths().command(paths=real))) if real else {}
            return {**found, **{p: 4 for p in paths if p in self.etc}}

        def contents(path: str):
            return self.etc[path].splitlines() if path in self.etc else None

        return {"FolderEntries": entries, "PresentPaths": present, "FileContents": contents,
                "DeployedServices": ["llm"] if LLM.manifest in self.etc else []}

    def data(self, ref: str) -> dict[str, Any]:
        return {**DEFAULTS, "profile": "cpu-tiny", "mode": "native",
                "state_dir": str(self.state_dir),
                "source": {"git": "https://example.org/beellama.cpp", "ref": ref}}

    def tree(self) -> list[str]:
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*")
                      if p.name != "blob" and p.name != "build")


@pytest.fixture
def machine(tmp_path, monkeypatch):
    m = Machine(tmp_path)
    monkeypatch.setattr(prune, "NATIVE_PREFIX", str(m.native))
    return m


def cleanup(m: Machine, ref: str, artifact: str) -> list[tuple[str, list[str]]]:
    ops = run_queued(lambda cfg: prune.ensure(cfg, "after", artifact), m.data(ref), m.facts())
    return [(n, c) for n, c in ops if "no rollback needs" in n]


def apply(m: Machine, ops: list[tuple[str, list[str]]]) -> list[str]:
    """Run the queued removals for real (each touches only the tmp folders)."""
    out = []
    for _, cmds in ops:
        for c in cmds:
            assert "rm -rf " + str(m.root) in c, c
            out += sh(c)
    return out


def test_upgrade_keeps_the_running_and_previous_builds_and_removes_older(machine):
    m = machine
    a, b = m.build(REF_A, 3), m.build(REF_B, 2)
    m.runs(b, before=a)  # before this deploy: B runs, A is its rollback
    c = m.build(REF_C, 2)  # this deploy's build (already built by the native task)
    ops = cleanup(m, REF_C, c)
    by_folder = {n.split(" from ")[1].split(" (")[0]: (n, cmds) for n, cmds in ops}
    name, cmds = by_folder[str(m.native)]
    # the name says what goes and the disk it frees, before the run (and --dry) does it
    assert "removes 1, 3 MiB" in name and SLUG[REF_B] in name and SLUG[REF_C] in name
    assert cmds == [f"rm -rf {m.native}/{SLUG[REF_A]} && echo 'beekeeper: removed 1 native "
                    f"builds ({SLUG[REF_A]}): 3 MiB freed'"]
    lines = apply(m, ops)
    assert any("3 MiB freed" in line for line in lines), lines
    left = m.tree()
    for ref in (REF_B, REF_C):  # the previous unit's and this deploy's build, tree, source
        assert f"opt/beekeeper/llama-server/{SLUG[ref]}" in left
        assert f"var/lib/beekeeper/src/{ref}" in left
        assert f"var/lib/beekeeper/native/{SLUG[ref]}" in left
    assert not [p for p in left if REF_A[:12] in p], left


def test_a_second_run_changes_nothing(machine):
    m = machine
    a, b = m.build(REF_A, 1), m.build(REF_B, 1)
    m.runs(b, before=a)
    c = m.build(REF_C, 1)
    apply(m, cleanup(m, REF_C, c))
    m.runs(c, before=b)  # what the deploy left: C runs, B is its rollback
    again = cleanup(m, REF_C, c)
    assert len(again) == 4 and all(cmds == [] for _, cmds in again), again
    assert all("removes none" in n for n, _ in again)


def test_an_unchanged_service_keeps_its_rollback(machine):
    m = machine
    a, b = m.build(REF_A, 1), m.build(REF_B, 1)
    m.runs(b, before=a)
    ops = cleanup(m, REF_B, b)  # the deploy runs what already runs: A stays the rollback
    assert all(cmds == [] for _, cmds in ops), ops


def test_nothing_is_removed_when_the_previous_unit_is_unknown(machine):
    m = machine
    a, b = m.build(REF_A, 1), m.build(REF_B, 1)
    m.runs(b, before=a)
    del m.etc[prev(LLM.manifest)]  # a `.prev` unit, but what it runs cannot be read
    c = m.build(REF_C, 1)
    # B becomes the previous unit: known; the unchanged case reads the `.prev` one
    assert cleanup(m, REF_B, b) == []
    m.etc[LLM.manifest] = "{not json"  # what runs now cannot be read either
    assert cleanup(m, REF_C, c) == []
    assert f"opt/beekeeper/llama-server/{SLUG[REF_A]}" in m.tree()


def test_the_cleanup_is_planned_only_when_the_deploy_names_its_artifact(machine):
    m = machine
    m.runs(m.build(REF_B, 1), before=m.build(REF_A, 1))
    ops = run_queued(lambda cfg: prune.ensure(cfg, "after"), m.data(REF_C), m.facts())
    assert not [n for n, _ in ops if "no rollback needs" in n]
