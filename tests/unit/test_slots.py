"""Host data `slots` (llama-server's -np): how many requests one server runs at once. The
server's command line, the VRAM plan (one recurrent state per slot) and verify's sizes (the
context per slot) follow it; a value out of range, a context too small for its slots, or
-np in server_extra_args is one line naming the key."""

import pytest

from beekeeper.core.config import load_host_config
from beekeeper.core.planner import predict
from beekeeper.verify.suites import Sizes

from .test_host_data import refused, with_


def served(**kw):
    return load_host_config(with_(**kw)).services[0]


def test_slots_reach_the_command_line_the_plan_and_verifys_sizes():
    one = served(profile="q8-turbo4-64k")
    two = served(profile="q8-turbo4-64k", slots=2)
    args = two.profile.server.args("/m.gguf")
    assert args[args.index("-np") + 1] == "2" and args[args.index("-c") + 1] == "65536"
    p1, p2 = predict(one.profile), predict(two.profile)
    # the KV cache is the context's (shared by the slots); each slot has its recurrent state
    assert p2.kv_mib == p1.kv_mib and p2.n_seq == 2
    assert p2.recurrent_mib == pytest.approx(2 * p1.recurrent_mib)
    # verify asks each request for what one slot holds: 32,768 tokens here
    s = Sizes.for_profile(two.profile, quick=False)
    assert max(s.decode_ctx_tokens) + s.decode_out_tokens <= 32_768
    assert s.niah_tokens <= 32_768 < Sizes.for_profile(one.profile, quick=False).niah_tokens * 2
    assert "2 slots" in two.profile.summary


def test_slots_with_a_context_give_that_context_to_share():
    svc = served(profile="cpu-tiny", ctx_size=8192, slots=4)
    assert (svc.profile.server.ctx_size, svc.profile.server.parallel) == (8192, 4)
    # the four-slot profile's own slots, when slots is not given
    assert served(profile="cpu-tiny-4slot").profile.server.parallel == 4
    assert served(profile="cpu-tiny-4slot", slots=1).profile.server.parallel == 1


@pytest.mark.parametrize("value", [0, -1, 17, 2.5, "2", True, None.__class__])
def test_a_number_of_slots_out_of_range_or_not_whole_is_refused(value):
    refused(with_(slots=value), "slots")


def test_slots_that_leave_under_256_tokens_each_are_refused_naming_the_key_given():
    # the smallest profiles hold 4,096 tokens: 16 slots of 256 fit; with ctx_size 2,048 not
    for name in ("cpu-tiny", "q8-f16-4k"):
        assert served(profile=name, slots=16).profile.server.parallel == 16
    msg = refused(with_(profile="cpu-tiny", ctx_size=2048, slots=16), "ctx_size")
    assert "below 4096 tokens (256 per slot, 16 slot(s))" in msg
    assert "fewer slots" in msg


def test_np_in_server_extra_args_points_to_slots():
    msg = refused(with_(server_extra_args=["-np", "2"]), "server_extra_args")
    assert "slots" in msg
    msg = refused(with_(server_extra_args=["--parallel=2"]), "server_extra_args")
    assert "slots" in msg
