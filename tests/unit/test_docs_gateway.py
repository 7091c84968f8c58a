"""docs/gateway.md's example inventory, as written, is one the kit accepts (issue 43: it was
refused on the VRAM budget), and the figures and HAProxy versions the page quotes are the
code's (fast offline tier: no host, no network)."""
from __future__ import annotations

import re
import runpy
import types
from pathlib import Path

import pytest

from beekeeper.core import gateway as gw
from beekeeper.core.config import load_host_config
from beekeeper.core.planner import predict
from beekeeper.core.profiles import PROFILES

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "gateway.md"


def _example() -> list[tuple[str, dict]]:
    block = re.search(r"```python\n(# inventories/home.py.*?)```", PAGE.read_text(), re.S)
    assert block, "docs/gateway.md has no example inventory"
    ns: dict = {}
    exec(block.group(1), ns)  # noqa: S102 - the page's own example
    return ns["gpu_boxes"]


def _group_data() -> dict:
    """group_data/all.py as pyinfra gives it to every host."""
    return {k: v for k, v in runpy.run_path(str(ROOT / "group_data" / "all.py")).items()
            if not k.startswith("_") and not isinstance(v, types.ModuleType)}


@pytest.fixture
def hosts(tmp_path, monkeypatch):
    """The example's hosts over the group defaults, with its key files made as the page says
    (relative paths: read from the folder pyinfra runs in)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "keys").mkdir()
    for name in ("backend", "gateway"):
        f = tmp_path / "keys" / f"{name}.key"
        f.write_text(f"{name}-0123456789abcdef\n")
        f.chmod(0o600)
    group = _group_data()
    return [(name, {**group, **data}) for name, data in _example()]


def test_every_host_of_the_example_is_accepted(hosts):
    for _name, data in hosts:
        load_host_config(data)  # a ConfigError fails the test with the kit's own line


def test_the_gateway_plans_both_models_from_the_example(hosts):
    plan = gw.plan(hosts[0][0], hosts)
    assert plan.left_out == []
    servers = {r.model: sorted(u.host for u in r.upstreams) for r in plan.routes}
    assert servers == {"q8-turbo4-64k": ["gpu-a.lan", "gpu-b.lan"],
                       "q4km-f16-32k": ["gpu-a.lan"]}
    cfg = load_host_config(hosts[0][1])
    assert cfg.data.gateway is not None and cfg.data.gateway.api_key_file == "keys/gateway.key"


def test_the_budget_figures_the_page_quotes_are_the_planners():
    text = " ".join(PAGE.read_text().split())
    a, b = (predict(PROFILES[n]).total_mib for n in ("q8-turbo4-64k", "q4km-f16-32k"))
    assert f"plan {a:,.0f} and {b:,.0f} MiB, {a + b:,.0f} MiB together" in text
    assert f"{a + b + 1024:,.0f} MiB" in text  # with preflight's 1 GiB margin
    budget = dict(_example())["gpu-a.lan"]["vram_budget_gib"]
    assert a + b <= budget * 1024 and f"{budget} GiB ({budget * 1024:,} MiB)" in text
    # why the example raises it: over the budget every host gets
    assert a + b > load_host_config(_group_data()).data.vram_budget_gib * 1024


def test_the_haproxy_versions_the_page_gives_are_the_codes():
    text = " ".join(PAGE.read_text().split())
    route = gw.HAPROXY_NEEDS[0]
    assert f"**HAProxy {route[0]}.{route[1]} or newer, with a key or without.**" in text
    assert f"`json_query` ({route[0]}.{route[1]})" in text
    # issue 43: Ubuntu 22.04's 2.4 runs a keyed gateway; Debian 11's 2.2 is refused
    assert gw.haproxy_refusal("2.4.24-0ubuntu0.22.04.1") is None
    assert "Ubuntu 22.04 ships HAProxy 2.4: it runs a keyed gateway" in text
    assert gw.haproxy_refusal("2.2.9-2+deb11u6") and "Below 2.4 (Debian 11's 2.2)" in text
