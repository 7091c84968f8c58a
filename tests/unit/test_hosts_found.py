"""
Hosts as users have them (issue 23, points 1, 3, 4, 5 and 8, and the reviewer's findings on
points 2 and 7), plus a host whose facts cannot be read (issue 24). Facts come from real
command output where it could be found (tests/unit/data/README-host-states.md); what was
typed by hand says so where it is defined.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from beekeeper.core.errors import BeekeeperError, PreflightError

from .harness import run_deploy, run_deploy_hosts
from .test_gpu_hosts import DEFAULTS, NATIVE, facts

DATA = Path(__file__).parent / "data"
NO_DRIVER = {"Wsl": NATIVE, "GpuInfo": None, "PciNvidiaGpus": 1}


# --- issue 24: a host whose facts cannot be read -----------------------------------------

@pytest.mark.parametrize("fact", ["InitSystem", "Wsl", "OsRelease", "DockerEngine",
                                  "BuildResources"])
def test_a_fact_that_cannot_be_read_is_one_line_naming_it_not_an_attribute_error(fact):
    # pyinfra answers a fact whose command failed (sudo missing: `_sudo = True` on a host
    # without it) with the fact's default, None
    with pytest.raises(PreflightError) as e:
        run_deploy(DEFAULTS, facts(**{fact: None}))
    msg = str(e.value)
    assert "could not read" in msg and f"fact {fact} returned nothing" in msg
    assert "_sudo" in msg and "sudo -n true" in msg and "\n" not in msg
    assert isinstance(e.value, BeekeeperError)


def test_an_unreadable_host_fails_alone_and_the_other_host_deploys():
    failed, ops = run_deploy_hosts({
        "no-sudo": (DEFAULTS, facts(InitSystem=None)),
        "good": (DEFAULTS, facts()),
    })
    assert failed == {"no-sudo"}
    assert ops["no-sudo"] == []
    assert any(n.startswith("Build server image") for n in ops["good"])
