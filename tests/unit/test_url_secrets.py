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

from .harness import COMMIT, place

CPU = {"profile": "cpu-tiny", "source": {"git": "https://x/y", "ref": COMMIT}}
HEAD, TAIL = "s3cr3tHEAD", "pa55TAIL"  # a password's two halves, either side of a raw char

QUERY_FORMS = [f"?token={HEAD}", f"?access_token={HEAD}", f"?arch=amd64&key={HEAD}",
               f"?X-Amz-Signature={HEAD}", f"#access_token={HEAD}", f"?hf_token={HEAD}"]
RAW_FORMS = ["#", "?", "/"]


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
    "https://mirror.example/ubuntu/?arch=amd64", "https://host/pkg%401.0",
    "ssh://git@github.com/o/r.git", "https://h/k.gpg?v=2",
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
    # an '@' in a path cannot be told from a password holding a raw '/': written *** too
    ("https://host/pkg@1.0?arch=amd64", "https://***@1.0?arch=amd64"),
    (f"https://u:1234/{HEAD}@host/x?next=/a@b", "https://***@host/x?next=/a@b"),
    (f"https://u:1234/a@{HEAD}/{TAIL}@host/x", "https://***@host/x"),
])
def test_redact_writes_every_secret_of_a_url_as_stars(text, want):
    assert redact(text) == want


# ------------------------------------------------------------------ a raw '/' where a port may be
# A password of digits with a raw '/' (`user:12/34@host`) reads as host `user`, port 12 and
# the path `/34@host`; a token with a raw '/' as the user name (`tok/en@host`) as host `tok`
# and the path `/en@host`. Nothing tells such a URL from a path holding an '@'
# (`https://host:8080/pkg@1.0`): an '@' after the authority, with no `=` or `&` before it, is
# refused as ambiguous (the fix: percent-encode it, or the root-only file), never quoted.

AMBIGUOUS = [
    f"https://user:1234/{HEAD}@host/repo",  # the password is digits, then a raw '/'
    f"https://user:1234/56/{HEAD}@host/repo",
    f"https://{HEAD}/{TAIL}@host/repo",  # a token as the user name, a raw '/' in it
    f"https://u:{HEAD}@ss/{TAIL}@host/",  # a raw '@' and a raw '/'
    f"https://user:1234/{HEAD}@host",
    f"https://user:1234/{HEAD}?{TAIL}@host/x",
    "https://host:8080/pkg@1.0",  # a path holding '@': cannot be told from the above
]
RAW_NO_PATH = [f"https://u:{HEAD}?{TAIL}@host", f"https://u:{HEAD}#{TAIL}@host",
               f"https://u:1234?{HEAD}@host/x", f"https://u:1234#{HEAD}@host"]


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("url", AMBIGUOUS + RAW_NO_PATH)
def test_a_raw_slash_after_a_port_like_password_is_refused_unquoted(key, url):
    msg = refusal(place(key, url))
    assert msg.startswith(f"host data `{key}`: "), msg
    assert HEAD not in msg and TAIL not in msg and "pkg@1.0" not in msg, msg
    if key != "server_extra_args":
        assert "percent-encode" in msg and "%2F" in msg and "root-only file" in msg, msg


@pytest.mark.parametrize("url", AMBIGUOUS + RAW_NO_PATH)
def test_the_parser_sees_userinfo_with_a_raw_slash_and_redact_hides_it(url):
    assert has_credentials(url)
    shown = redact(f"GET {url} failed")
    assert HEAD not in shown and TAIL not in shown and "***@" in shown, shown
    assert shown.endswith(" failed")


@pytest.mark.parametrize("url", [f"https://h/x?%74oken={HEAD}", f"https://h/x?access%5Ftoken={HEAD}",
                                 f"https://h/x?TOKEN={HEAD}", f"git+https://{HEAD}@host/r.git"])
def test_a_percent_encoded_parameter_name_or_a_git_plus_scheme_is_still_a_secret(url):
    assert has_credentials(url)
    assert HEAD not in redact(url)
    msg = refusal(place("hf_endpoint", url))
    assert msg.startswith("host data `hf_endpoint`: ") and HEAD not in msg, msg


@pytest.mark.parametrize("url", [
    "https://host/x?email=a@b.example", "https://[::1]:8080/pkg@1.0", "https://host/pkg%401.0",
    "https://host:8080/a/b?next=/c@d",
])
def test_an_at_sign_after_a_query_parameter_or_an_ipv6_host_is_no_secret(url):
    assert not has_credentials(url)


# ------------------------------------------------------------------ a login in an image reference
# An image reference is no URL, but `user:pass@registry/img` fits its pattern and would be
# written into the Dockerfile's FROM and printed: an '@' is a digest's only (name@sha256:...).

@pytest.mark.parametrize("key,data", [
    ("base_images.build", {"base_images": {"build": f"user:{HEAD}@registry.example/img:1"}}),
    ("base_images.runtime", {"base_images": {"runtime": f"{HEAD}@registry.example/img"}}),
    ("preload_images", {"preload_images": {f"user:{HEAD}@registry.example/img": "/srv/a.tar"}}),
    ("base_images.build", {"base_images": {"build": f"user:{HEAD} x@registry.example/img"}}),
])
def test_a_login_in_an_image_reference_is_refused_unquoted(key, data):
    msg = refusal(data)
    assert msg.startswith(f"host data `{key}"), msg
    assert HEAD not in msg and "docker login" in msg, msg


def test_an_image_pinned_by_digest_passes():
    ref = "debian@sha256:" + "a" * 64
    cfg = load_host_config({**CPU, "base_images": {"build": ref},
                            "preload_images": {ref: "/srv/a.tar"}})
    assert cfg.data.base_images and cfg.data.base_images.build == ref
    assert ref in (cfg.data.preload_images or {})
