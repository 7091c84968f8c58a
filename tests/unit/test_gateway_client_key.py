"""
The gateway's own key reaches HAProxy as an ACL pattern file (`-f client.key`), and HAProxy's
pattern reader skips a line that begins with '#' as a comment (pat_ref_read_from_file: "ignore
lines beginning with a dash", `if (*c == '#') continue;`, in 2.4 as in 3.0). A key that begins
with '#' would leave the ACL with no pattern: `haproxy -c` passes, /health answers (it needs no
key), and every client, with the right key, gets 401. It is refused in one line naming the key.
"""

from __future__ import annotations

import pytest

from beekeeper.core import gateway as gw
from beekeeper.core.config import load_host_config
from beekeeper.core.errors import ConfigError
from beekeeper.core.hostdata import GatewayData

from .harness import gateway_with as with_


def _key(tmp_path, text: str) -> str:
    p = tmp_path / "gateway.key"
    p.write_text(text + "\n")
    p.chmod(0o600)
    return str(p)


def test_the_key_is_an_acl_pattern_file(tmp_path):
    cfg = gw.render_config(GatewayData(api_key_file=_key(tmp_path, "k")), [])
    assert f"-m str -f {gw.PATHS.client_key}" in cfg


def test_a_gateway_key_starting_with_a_hash_is_refused_in_one_line(tmp_path):
    path = _key(tmp_path, "#family-secret-2026")
    with pytest.raises(ConfigError) as e:
        load_host_config(with_(gateway={"api_key_file": path}))
    msg = str(e.value)
    assert "host data `gateway.api_key_file`" in msg and "'#'" in msg and "\n" not in msg, msg
    assert msg.endswith(
        "starts with '#', which HAProxy reads as a comment in the gateway's key file (every "
        "request would get 401); fix: use a key that does not start with '#', e.g. `openssl "
        "rand -hex 32`"), msg


def test_a_hash_inside_the_key_is_fine(tmp_path):
    path = _key(tmp_path, "family#secret")
    assert load_host_config(with_(gateway={"api_key_file": path})).data.gateway.api_key_file == path
