"""
Removing a systemd unit the kit wrote is written once (operations/lifecycle.unit_removal):
a service's removal (operations/services.removal_script) and the uninstall's removal of a
unit with no manifest, or the gateway's (lifecycle.unit_removed), run the same lines. Run
here in a shell on a folder standing in for /etc/systemd/system, with a `systemctl` that
only writes down what it was asked.
"""

from __future__ import annotations

import subprocess

import pytest

from beekeeper.core.paths import ServicePaths
from beekeeper.operations import lifecycle
from beekeeper.operations.lifecycle import unit_removal
from beekeeper.operations.services import removal_script


@pytest.fixture
def host(tmp_path):
    """A unit, its rollback copy and its drop-in folder, and a logging systemctl."""
    tmp_path = tmp_path / "host"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    ctl = bin_dir / "systemctl"
    ctl.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/systemctl.log\n')
    ctl.chmod(0o755)
    unit = tmp_path / "beekeeper-x.service"
    unit.write_text("[Unit]\n")
    (tmp_path / "beekeeper-x.service.prev").write_text("[Unit]\n")
    (tmp_path / "beekeeper-x.service.d").mkdir()
    return tmp_path


def run(lines: list[str], tmp_path) -> list[str]:
    subprocess.run(["sh", "-c", " ; ".join(lines)], check=True, timeout=30,
                   env={"PATH": f"{tmp_path}/bin:/usr/bin:/bin"})
    log = tmp_path / "systemctl.log"
    return log.read_text().splitlines() if log.exists() else []


def lines(tmp_path) -> list[str]:
    unit = tmp_path / "beekeeper-x.service"
    return unit_removal(unit.name, str(unit), f"{unit}.d")


def test_the_unit_goes_stopped_and_systemd_is_told(host, monkeypatch):
    monkeypatch.setattr(lifecycle, "SYSTEMD_RUNS", "true")  # systemd is PID 1
    asked = run(lines(host), host)
    assert asked == ["disable --now beekeeper-x.service", "daemon-reload",
                     "reset-failed beekeeper-x.service"]
    assert sorted(p.name for p in host.iterdir()) == ["bin", "systemctl.log"]


def test_a_drop_in_folder_holding_your_files_stays(host, monkeypatch):
    monkeypatch.setattr(lifecycle, "SYSTEMD_RUNS", "true")
    (host / "beekeeper-x.service.d" / "override.conf").write_text("[Service]\n")
    run(lines(host), host)
    assert (host / "beekeeper-x.service.d" / "override.conf").exists()
    assert not (host / "beekeeper-x.service").exists()


def test_without_systemd_only_the_files_go_and_a_second_run_changes_nothing(host,
                                                                           monkeypatch):
    monkeypatch.setattr(lifecycle, "SYSTEMD_RUNS", "false")  # a GPU container's PID 1
    assert run(lines(host), host) == []
    assert sorted(p.name for p in host.iterdir()) == ["bin"]
    assert run(lines(host), host) == []  # nothing left: each line tolerates that


def test_a_service_and_a_lone_unit_are_removed_by_the_same_lines():
    p = ServicePaths("llm")
    script = removal_script("llm")
    assert script.startswith(" ; ".join(unit_removal(p.unit_name, p.unit, p.dropin_dir)))
    assert "rm -rf /etc/beekeeper/llm" in script and "docker rm -f beekeeper-llm" in script
