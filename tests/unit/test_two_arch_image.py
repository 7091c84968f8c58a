"""
A host with cards of two archs (a 4090 and a 3090): the deploy builds one image for both
('86;89', driver_preflight.archs_of_cards), and preflight's question "does this deploy build
the image?" (the disk-space check, the proxy warning) looks for that image's tag, not the
tag of the first card's arch alone.
"""

from __future__ import annotations

from dataclasses import replace

from beekeeper.core.build import build_spec
from beekeeper.facts.gpu import GpuCard
from beekeeper.tasks import preflight as pf

from .harness import RES, RTX4090, cfg, images, on_host

RTX3090 = GpuCard(name="NVIDIA GeForce RTX 3090", driver_version="596.21", compute_cap="8.6",
                  memory_total_mib=24576)
TWO_CARDS = replace(RTX4090, gpus=(*RTX4090.gpus, RTX3090))


def tag(archs: str | None) -> str:
    c = cfg()
    return build_spec(c, "8.9", RES.cpus, RES.mem_total_bytes, RES.machine,
                      cuda_version=c.data.cuda_version, cuda_arch=archs).tag()


def test_the_image_built_for_both_cards_is_found_and_not_built_again():
    assert tag("86;89") != tag(None)
    with on_host(DockerImageId=images(tag("86;89"))):
        assert pf.build_there(cfg(), TWO_CARDS, RES, None) is True


def test_an_image_for_the_first_cards_arch_alone_does_not_count():
    with on_host(DockerImageId=images(tag(None))):
        assert pf.build_there(cfg(), TWO_CARDS, RES, None) is False


def test_host_datas_arch_list_rules_over_the_cards():
    c = cfg(cuda_arch="89")
    with on_host(DockerImageId=images(tag("89"))):
        assert pf.build_there(c, TWO_CARDS, RES, None) is True
