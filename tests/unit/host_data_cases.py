"""
A recorded battery of host-data cases and what load_host_config decides for each: accepted
(with the values a deploy reads) or refused (naming a key). Each case changes one key of a
good host (or of one `services` entry, or adds one cross-field situation), so the key named
is determined. A refactor of config.py or hostdata.py keeps every decision, or changes the
recorded file on purpose (the diff says which cases changed):

    python -m tests.unit.host_data_cases --write   # rewrite tests/unit/data/host-data-decisions.txt
    python -m tests.unit.host_data_cases --compare MODULE  # another load_host_config's decisions
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Any

FILE = Path(__file__).parent / "data" / "host-data-decisions.txt"
LOCAL = {"path": "/srv/src.tar.gz", "ref": "lcp0.3.36"}
GIT = {"git": "https://x/y", "ref": "a" * 40}
BASES = {
    "cpu": {"profile": "cpu-tiny", "source": LOCAL},
    "gpu": {"profile": "q8-turbo4-64k", "source": GIT, "mode": "native"},
    "draft": {"profile": "q8-dflash-32k", "source": GIT},
}
VALUES: list[Any] = [
    None, 0, 1, -1, 255, 256, 1024, 8083, 65535, 65536, 2**70, 1.5, 10.0, math.nan, math.inf,
    True, False, "", "x", "x\n", "\n", "/x", "/srv/m", "/srv/m\n", "/srv/../m", "~/x", "rel",
    "ü", "a\x00b", [], [1], ["x"], ["provision"], ["provision", "build"], ("provision",),
    ["model"], [{}], {}, {"a": 1}, b"x", "8083", "127.0.0.1", "0.0.0.0", "::1", "localhost",
    "10.0.0.5", "gpu-box.lan", "gpu-box.lan\n", "cpu-tiny", "q8-f16-4k", "nope", "container",
    "native", "vm", "systemd", "compose", "present", "absent", "llm", "llm\n", "LLM",
    "gateway", "a/b", "a/b-", "a/b..c", "a/b\n", "m.gguf", "m.gguf\n", "m.bin", "main",
    "a" * 40, "a" * 40 + "\n", "b" * 64, "b" * 64 + "\n", "13.2.1", "13.2.1\n", 13.2, "12",
    "89", "89;120", "89\n", "sm_89", 89, 595, 99, "595", "1.17.8-1", "1.17.8-1\n",
    "https://m", "https://m/\n", "ftp://m", "open", "proprietary",
    ["--threads", "8"], ["--host", "0.0.0.0"], ["-c", "262144"], ["--port=9"], ["-np", "4"],
    ["--x\n"], {"build": "debian:bookworm"}, {"build": "debian:bookworm\n"}, {"buidl": "x"},
    {"debian:bookworm": "/srv/a.tar"}, {"a b": "/x.tar"}, {"debian:bookworm": "rel.tar"},
    {"cuda": "https://m/x"}, {"cudaa": "https://m/x"}, {"cuda": 5},
    {"port": 4000}, {"port": 8083}, {"bind_address": "0.0.0.0"}, {"timeout_s": 5},
    {"git": "https://x/y", "ref": "a" * 40}, {"git": "https://x/y", "ref": "main"},
    {"path": "/s.tgz", "ref": "x"}, {"path": "/s.tgz", "ref": "x\n"}, {"ref": "x"},
    [{"profile": "cpu-tiny"}], [{"profile": "cpu-tiny"}, {"profile": "cpu-tiny"}],
    [{"profile": "cpu-tiny"}, {"profile": "cpu-tiny", "service_name": "b", "port": 8084}],
    [{"profile": "cpu-tiny"}, {"profile": "q8-f16-4k", "service_name": "b", "port": 8084}],
    [{"profile": "q8-turbo4-64k"}, {"profile": "q8-f16-4k", "service_name": "b",
                                     "port": 8084}],
    [{"service_name": "old", "state": "absent"}], [{"profile": "cpu-tiny", "prot": 1}],
    # issue 33: credentials in URLs, near misses, a long value, CUDA's arch suffixes, a flag's
    # value that starts with `-`, a secret flag
    "https://u:p@m/x", "https://tok@m/x", "ssh://git@m/x", "CPU-TINY", "x" * 300, "120f",
    "89x", "86a", ["--system-prompt", "-c"], ["--hf-token", "hf_x"], ["--seed", "-1"],
    {"cuda": "https://u:p@m/x"}, {"git": "https://u:p@x/y", "ref": "a" * 40},
    # issue 44: a 5,000-character value of each shape, as a value, an item and a mapping's
    # key and value (every refusal echoing it is at most errors.LINE_MAX characters long)
    *(LONG := [
        "x" * 5000, "/" + "x" * 4999, ("ab " * 1667)[:5000], "https://m/" + "x" * 4990,
        "x" * 4995 + ".gguf", ["x" * 5000], {"x" * 5000: "x" * 5000},
        {"x" * 5000: "/srv/a.tar"},
    ]),
]
SERVICE_ENTRY_KEYS = ("port", "ctx_size", "server_extra_args", "service_name", "state",
                      "draft_repo", "model_sha256", "bind_address", "gateway_port")


def cases() -> list[tuple[str, dict[str, Any]]]:
    """(name, host data): each base with one key set to each value, one services entry with
    one key set to each value, and each value for an unknown key."""
    from beekeeper.core.config import KIT_KEYS, SERVICE_KEYS

    out: list[tuple[str, dict[str, Any]]] = []
    for base_name, base in BASES.items():
        keys = KIT_KEYS | {"prot"} if base_name == "cpu" else \
            {*SERVICE_KEYS, "mode", "runtime", "vram_budget_gib", "services"}
        for key in sorted(keys):
            # beside `services` the base's profile is read by none (refused there since the
            # cases were recorded: each entry names its own), so it is left out
            for i, value in enumerate(VALUES):
                top = {k: v for k, v in base.items()
                       if not (key == "services" and value is not None and k == "profile")}
                out.append((f"{base_name}:{key}={i}", {**top, key: value}))
    for key in SERVICE_ENTRY_KEYS:
        for i, value in enumerate(VALUES):
            entry = {"profile": "cpu-tiny", key: value}
            out.append((f"entry:{key}={i}", {"source": LOCAL, "services": [entry]}))
    return out


def decision(load: Any, data: dict[str, Any]) -> list[Any]:
    """['refused', key] or ['ok', the values a deploy reads], as JSON."""
    try:
        cfg = load(data)
    except ValueError as e:  # ConfigError, of either the old or the new module
        text = str(e)
        return ["refused", text.split("`")[1] if text.startswith("host data `") else text]
    services = [[s.name, s.profile.name, s.data.port, s.data.bind_address,
                 s.profile.server.ctx_size, list(s.data.server_extra_args), s.model.filename,
                 getattr(s.model.source, "repo", None), getattr(s.model.source, "revision", None),
                 s.model.sha256, s.draft.sha256 if s.draft else None, s.data.gateway_port]
                # keys added later are recorded where set, so earlier digests stay
                + ([s.data.model_alias] if s.data.model_alias is not None else [])
                for s in cfg.services]
    gw, d = cfg.data.gateway, cfg.data
    later = {"persistent_root": d.persistent_root} if d.persistent_root is not None else {}
    base = d.base_images.model_dump(exclude_none=True) if d.base_images else {}
    repos = d.nvidia_repos.model_dump(exclude_none=True) if d.nvidia_repos else {}
    return ["ok", {**later,
        "services": services, "absent": list(cfg.absent), "mode": d.mode,
        "runtime": cfg.requested_way.runtime, "dirs": [d.model_dir, d.state_dir],
        "source": [cfg.source.kind, cfg.source.ref, cfg.source.git, cfg.source.path],
        "cuda": [d.cuda_version, d.cuda_arch, float(d.vram_budget_gib), d.build_jobs],
        "run": [d.health_timeout_s, list(d.stages), d.hf_endpoint, d.server_webui],
        "images": [base, dict(d.preload_images or {}), d.install_docker],
        "gateway": gw and [gw.port, gw.bind_address, gw.api_key_file, gw.check_interval_s,
                           gw.max_body_kib, gw.timeout_s],
        "gateway_address": d.gateway_address,
        "tasks": [repos, d.driver_branch, d.container_toolkit_version, d.install_cuda_toolkit,
                  d.hf_token_file, d.allow_reboot, d.use_docker_desktop, d.upgrade_driver,
                  d.cuda_follows_driver, d.driver_flavour]}]


def decisions(load: Any) -> dict[str, list[Any]]:
    return {name: json.loads(json.dumps(decision(load, data))) for name, data in cases()}


def _short(key: str, decided: list[Any]) -> str:
    """One decision in a word: `-` refused naming the key the case changed, `-KEY` refused
    naming another key, or the first 8 hex digits of a digest of the values."""
    if decided[0] != "ok":
        named = str(decided[1]).removeprefix("services[0].")
        return "-" if named == key else "-" + str(decided[1]).replace(" ", "_")
    return hashlib.sha1(json.dumps(decided[1], sort_keys=True).encode(),
                        usedforsecurity=False).hexdigest()[:8]


def lines(load: Any) -> list[str]:
    """A line per changed key (`base:key`), its decision for each of VALUES in order."""
    rows: dict[str, list[str]] = {}
    for name, decided in decisions(load).items():
        group, _ = name.split("=")
        rows.setdefault(group, []).append(_short(group.split(":")[1], decided))
    return [f"{group} {' '.join(words)}" for group, words in rows.items()]


def main(argv: list[str]) -> int:
    from beekeeper.core.config import load_host_config

    if argv[:1] == ["--write"]:
        FILE.write_text("\n".join(lines(load_host_config)) + "\n")
        print(f"{FILE}: {len(cases())} cases")
        return 0
    if argv[:1] == ["--compare"] and len(argv) == 2:
        import importlib

        other = importlib.import_module(argv[1]).load_host_config
        now, then = decisions(load_host_config), decisions(other)
        for name in now:
            if now[name] != then[name]:
                print(f"{name}: {then[name][0]} {str(then[name][1])[:60]} -> "
                      f"{now[name][0]} {str(now[name][1])[:60]}")
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
