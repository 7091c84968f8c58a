"""Host data `slots` (llama-server's -np): how many requests one server runs at once. The
server's command line, the VRAM plan (one recurrent state per slot) and verify's sizes (the
context per slot) follow it; a value out of range, a context too small for its slots, or
-np in server_extra_args is one line naming the key."""

import pytest

from beekeeper.core.config import load_host_config
from beekeeper.core.planner import predict, recurrent_state_bytes
from beekeeper.verify.suites import Sizes

from .harness import refused, with_


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
    assert s.niah_tokens <= 32_768 < Sizes.for_profile(one.profile, quick=False).niah_tokens
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
    assert "use slots" in msg, msg
    msg = refused(with_(server_extra_args=["--parallel=2"]), "server_extra_args")
    assert "use slots" in msg, msg


def test_the_kv_cache_is_sized_as_llama_cpp_sizes_it_per_slot():
    # llama.cpp (src/llama-context.cpp): -c 4352 -np 16 runs 16 slots of 512 (8,192 cells),
    # as the sandbox's llama-server logged it; one slot keeps the padded context
    svc = served(profile="cpu-tiny", ctx_size=4352, slots=16)
    assert predict(svc.profile).kv_cells == 8192
    assert predict(served(profile="cpu-tiny", ctx_size=4352).profile).kv_cells == 4352


def test_a_draft_profile_keeps_one_slot():
    msg = refused(with_(profile="q8-dflash-32k", slots=2), "slots")
    assert "whose draft model serves one slot" in msg
    assert served(profile="q8-dflash-32k", slots=1).profile.server.parallel == 1


def test_the_record_keeps_the_slots_and_verify_sizes_by_them(tmp_path, capsys):
    import argparse

    from beekeeper import verify_main
    from beekeeper.core.deployed import DeployedService
    from beekeeper.tasks.service import record

    from .harness import requested_runtime

    cfg = load_host_config(with_(profile="q8-turbo4-64k", slots=2))
    text = record(cfg, requested_runtime(cfg), cfg.service, "img").to_json()
    assert DeployedService.from_json(text).slots == 2
    args = verify_main.parser().parse_args(["--url", "http://127.0.0.1:8083"])
    assert verify_main.from_deployed(args, text, "gpu-box") is None
    assert args.slots == 2 and "2 slots" in capsys.readouterr().out
    sizes = verify_main.sizes_of(args, verify_main.profile_of(args))
    assert max(sizes.decode_ctx_tokens) + sizes.decode_out_tokens <= 32_768
    assert sizes.niah_tokens <= 32_768 and sizes.ttft_tokens <= 32_768
    # a record of a kit before slots were written: the profile's one slot
    old = argparse.Namespace(**{**vars(verify_main.parser().parse_args(
        ["--url", "http://127.0.0.1:8083"]))})
    legacy = text.replace('"slots": 2,', "").replace('"slots": 2', "")
    assert '"slots"' not in legacy
    assert verify_main.from_deployed(old, legacy, "gpu-box") is None
    assert old.slots is None and verify_main.profile_of(old).server.parallel == 1


def test_a_dflash_profile_gives_its_one_slot_the_whole_context():
    from beekeeper.core.profiles import PROFILES

    for name in ("q8-dflash-32k", "q8-turbo3tcq-dflash-128k"):
        s = PROFILES[name].server
        assert "--kv-unified" in s.args("/m", "/d") and s.parallel == 1
        p = predict(PROFILES[name])
        # the KV cache is -c cells (unified), and the plan holds the speculative server's
        # second recurrent state (its backup, beellama's server-context.cpp)
        assert p.kv_cells == s.ctx_size
        one = sum(recurrent_state_bytes(1, PROFILES[name].layout)) / 2**20
        assert one > 0 and p.recurrent_mib == pytest.approx(2 * one)
        assert "x2: a draft model" in p.table()
    # the CPU build's draft (upstream llama.cpp) does not double its sequences
    assert "--kv-unified" not in PROFILES["cpu-tiny-draft"].server.args("/m", "/d")
