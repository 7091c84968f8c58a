"""The gateway routes by the name each server answers to: host data `model_alias` (the
server's --alias) where a service sets it, else the profile's name (issue 43, point 3)."""

from __future__ import annotations

import json

import pytest

from beekeeper.core import gateway as gw
from beekeeper.core.errors import ConfigError, host_data
from beekeeper.core.hostdata import GatewayData

SOURCE = {"path": "/srv/src.tar.gz", "ref": "lcp0.3.36"}


def _host(*services, **kw):
    return {"source": SOURCE, "services": list(services), **kw}


def _svc(name, port=8083, **kw):
    return {"service_name": name, "profile": "cpu-tiny", "port": port, **kw}


def test_a_service_with_model_alias_is_routed_and_listed_by_it():
    plan = gw.plan("gw", [("gw", _host(_svc("mine", model_alias="my-finetune"),
                                       _svc("plain", port=8084, profile="cpu-smollm")))])
    assert [r.model for r in plan.routes] == ["cpu-smollm", "my-finetune"]
    cfg = gw.render_config(GatewayData(), plan.routes)
    assert "use_backend model_my-finetune if { var(txn.model) -m str my-finetune }" in cfg
    assert "use_backend model_my-finetune if { path_beg /model/my-finetune/ }" in cfg
    assert "cpu-tiny" not in cfg  # the profile's name answers nothing
    ids = [m["id"] for m in json.loads(gw.models_json(plan.routes))["data"]]
    assert ids == ["cpu-smollm", "my-finetune"]


def test_an_alias_with_a_colon_is_routed_as_written():
    plan = gw.plan("gw", [("gw", _host(_svc("t", model_alias="tiny:q8")))])
    cfg = gw.render_config(GatewayData(), plan.routes)
    assert "backend model_tiny:q8\n" in cfg
    assert "{ var(txn.model) -m str tiny:q8 }" in cfg


def test_one_profile_under_two_aliases_is_two_models():
    plan = gw.plan("gw", [("gw", _host(_svc("a", model_alias="team-a"),
                                       _svc("b", port=8084, model_alias="team-b")))])
    assert [(r.model, len(r.upstreams)) for r in plan.routes] == [("team-a", 1), ("team-b", 1)]


def test_servers_answering_to_one_alias_are_balanced_when_they_serve_the_same():
    hosts = [(n, _host(_svc("t", model_alias="shared"), gateway_address=f"{n}.lan"))
             for n in ("a", "b")]
    assert [(r.model, len(r.upstreams)) for r in gw.plan("gw", hosts).routes] == [("shared", 2)]


def test_two_services_answering_to_one_name_but_serving_different_models_are_refused():
    """An alias that is another service's profile name, or two services under one alias
    with different profiles: the gateway would balance two models as one."""
    for other in (_svc("b", port=8084, profile="cpu-smollm", model_alias="cpu-tiny"),
                  _svc("b", port=8084, profile="cpu-smollm", model_alias="x")):
        first = _svc("a", model_alias="x") if other["model_alias"] == "x" else _svc("a")
        with pytest.raises(ConfigError) as e:
            gw.plan("gw", [("gw", _host(first, other))])
        assert e.value.subject == host_data("model_alias")
        assert "both answer as model" in str(e.value) and "another model_alias" in str(e.value)
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("alias", ["org/model", "a+b"])
def test_an_alias_the_gateway_cannot_route_is_refused_in_one_line(alias):
    with pytest.raises(ConfigError) as e:
        gw.plan("gw", [("gw", _host(_svc("t", model_alias=alias)))])
    assert e.value.subject == host_data("model_alias")
    assert repr(alias) in e.value.problem and "service t on gw" in e.value.problem
    assert "letters, digits and . _ - :" in e.value.fix
