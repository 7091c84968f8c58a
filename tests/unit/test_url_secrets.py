"""
Credentials outside `user:pass@` in URL-valued host data (issue 44): a token in a query
string or fragment (`?token=`, `?access_token=`, `?key=`, `#access_token=`) and a password
holding a raw `#`, `?` or `/` (which a URL parser reads as the end of the host) are refused
in every URL key, naming the key, never the secret; redact() writes them `***` wherever a
line quotes a URL.
"""

from __future__ import annotations

import pytest

from beekeeper.core.config import load_host_config
from beekeeper.core.errors import ConfigError
from beekeeper.core.hostdata import has_credentials, redact

COMMIT = "a" * 40
CPU = {"profile": "cpu-tiny", "source": {"git": "https://x/y", "ref": COMMIT}}
HEAD, TAIL = "s3cr3tHEAD", "pa55TAIL"  # a password's two halves, either side of a raw char

QUERY_FORMS = [f"?token={HEAD}", f"?access_token={HEAD}", f"?arch=amd64&key={HEAD}",
               f"?X-Amz-Signature={HEAD}", f"#access_token={HEAD}", f"?hf_token={HEAD}"]
RAW_FORMS = ["#", "?", "/"]


def place(key: str, url: str) -> dict:
    """Host data giving `url` to `key`."""
    if key == "source.git":
        return {"source": {"git": url, "ref": COMMIT}}
    if key.startswith("nvidia_repos."):
        return {"nvidia_repos": {key.split(".")[1]: url}}
    if key == "server_extra_args":
        return {"server_extra_args": ["--mmproj-url", url]}
    return {key: url}


KEYS = ["source.git", "hf_endpoint", "nvidia_repos.cuda", "nvidia_repos.cuda_key",
        "nvidia_repos.toolkit", "nvidia_repos.toolkit_key", "server_extra_args"]


def refusal(data: dict) -> str:
    with pytest.raises(ConfigError) as e:
        load_host_config({**CPU, **data})
    msg = str(e.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("form", QUERY_FORMS)
def test_a_secret_in_the_query_string_is_refused_never_quoted(key, form):
    msg = refusal(place(key, f"https://mirror.example/repo/x.gguf{form}"))
    assert msg.startswith(f"host data `{key}`: "), msg
    assert HEAD not in msg and "credentials" in msg, msg
    if key != "server_extra_args":
        assert "secret parameter" in msg and "=***" in msg, msg


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("raw", RAW_FORMS)
def test_a_password_with_a_raw_hash_question_mark_or_slash_is_refused_unquoted(key, raw):
    msg = refusal(place(key, f"https://user:{HEAD}{raw}{TAIL}@mirror.example/repo"))
    assert msg.startswith(f"host data `{key}`: "), msg
    assert HEAD not in msg and TAIL not in msg, msg
    if key != "server_extra_args":
        assert "raw '#', '?' or '/'" in msg and "percent-encode" in msg and "%23" in msg, msg


def test_the_fix_still_points_where_credentials_belong():
    apt = refusal(place("nvidia_repos.cuda", f"https://u:{HEAD}#{TAIL}@m/cuda"))
    assert "/etc/apt/auth.conf.d/" in apt
    hub = refusal(place("hf_endpoint", f"https://mirror/?token={HEAD}"))
    assert "hf_token_file" in hub


@pytest.mark.parametrize("url", [
    "https://mirror.example/ubuntu/?arch=amd64", "https://host/pkg@1.0",
    "https://host:8080/pkg@1.0", "ssh://git@github.com/o/r.git", "https://h/k.gpg?v=2",
    "https://h/x?monkey=1",
])
def test_urls_without_secrets_pass(url):
    assert not has_credentials(url)


@pytest.mark.parametrize("text,want", [
    (f"GET https://h/x?token={HEAD}&arch=amd64 failed",
     "GET https://h/x?token=***&arch=amd64 failed"),
    (f"'https://h/x#access_token={HEAD}'", "'https://h/x#access_token=***'"),
    (f"https://u:{HEAD}#{TAIL}@host/x", "https://***@host/x"),
    (f"https://u:{HEAD}?{TAIL}@host/x?q=1", "https://***@host/x?q=1"),
    (f"https://u:{HEAD}/{TAIL}@host/x", "https://***@host/x"),
    (f"https://u:{HEAD}@ss#{TAIL}@host/", "https://***@host/"),
    (f"https://{HEAD}#{TAIL}@host/x", "https://***@host/x"),
    ("https://host/pkg@1.0?arch=amd64", "https://host/pkg@1.0?arch=amd64"),
])
def test_redact_writes_every_secret_of_a_url_as_stars(text, want):
    assert redact(text) == want
