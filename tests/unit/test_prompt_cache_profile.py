"""The host prompt cache (llama-server's --cache-ram): off in the production profile (its
save, 0.8 s at 60K on the H200, sat inside each new prompt's time to first token:
benchmarks/h200/2026-12-04-candidates), on in q8-turbo4-64k-cache, and a user's
server_extra_args may set it on any profile (theirs comes after the profile's: the last
one counts in llama.cpp's parser)."""

from beekeeper.core.config import load_host_config
from beekeeper.core.profiles import PROFILES
from beekeeper.tasks.service import server_args

from .harness import requested_runtime, with_


def cache_ram(args: list[str]) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args) if a in ("--cache-ram", "-cram")]


def test_the_production_profile_turns_the_prompt_cache_off_and_its_twin_keeps_it():
    assert cache_ram(PROFILES["q8-turbo4-64k"].server.args("/m")) == ["0"]
    assert cache_ram(PROFILES["q8-turbo4-64k-bs"].server.args("/m")) == ["0"]
    twin = PROFILES["q8-turbo4-64k-cache"].server
    assert cache_ram(twin.args("/m")) == []  # llama-server's own 8,192 MiB
    prod = PROFILES["q8-turbo4-64k"].server
    # the twin differs from the default by the cache alone
    assert [a for a in prod.args("/m") if a not in ("--cache-ram", "0")] == twin.args("/m")


def test_a_user_may_set_the_prompt_cache_after_the_profiles():
    cfg = load_host_config(with_(profile="q8-turbo4-64k",
                                 server_extra_args=["--cache-ram", "4096"]))
    # the last counts
    assert cache_ram(server_args(cfg, requested_runtime(cfg), cfg.service)) == ["0", "4096"]
