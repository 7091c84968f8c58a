"""
The NVIDIA driver preflight's rules where a mutant of them survived the rules' own tests
(issue 45: tasks/driver_preflight.py through scripts/mutation.py, after its refusals were
rewritten at 76ec01d; docs/testing.md, "Mutation testing"). Each test holds the decision and
the refusal's parts (subject, problem, fix) on both sides of the rule.
"""

from __future__ import annotations

import pytest

from beekeeper.core.config import load_host_config
from beekeeper.core.errors import PreflightError
from beekeeper.tasks import driver_preflight as dp

from .harness import DEFAULTS


def cfg(**over):
    return load_host_config({**DEFAULTS, **over})


def test_the_branch_a_card_must_keep_is_that_of_the_cuda_preflight_judges():
    """check_branch_keeps_card judges the branch of the CUDA release it is given (the
    driver tasks pass HostFacts.cuda_version: the host's own toolkit, or the driver's CUDA an
    image follows), not host data's cuda_version (`x_check_branch_keeps_card__mutmut_8`)."""
    pascal = [("the GTX 1080 is compute capability 6.1", "6.1")]
    on_12 = cfg(cuda_version="12.9.1")
    dp.check_branch_keeps_card(on_12, pascal)  # CUDA 12.9 ships with branch 575
    with pytest.raises(PreflightError) as e:
        dp.check_branch_keeps_card(on_12, pascal, "13.2")
    assert (e.value.subject, e.value.problem, e.value.fix) == (
        "host data `driver_branch`", "branch 595 drops Maxwell, Pascal and Volta, and the GTX "
        "1080 is compute capability 6.1: NVIDIA's 580 is its last",
        "set driver_branch = 580 (with cuda_version = '12.9.1')")
    dp.check_branch_keeps_card(cfg(), pascal, "12.9.1")  # host data's 13.2 is not judged
