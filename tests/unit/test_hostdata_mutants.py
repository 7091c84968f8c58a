"""
Host data's declarations, each pinned where a mutant of core/hostdata.py survived (issue 45;
docs/testing.md, "Mutation testing"): every key's refusal line word for word (its problem and
its fix), its default and its line of the README's table, the paths' examples, the CUDA
release and arch given as text or a number, and the URL-credential refusals of each kind.

Most of these rules are made when the module is imported: `key()` builds each key's
declaration in the class bodies, `path_of()`, `_text_version()`, `no_credentials()` and
`_pin()` build the validators a key is annotated with. A mutant of one of them is only seen
by a module imported with it, and mutmut imports the module once, before it picks a mutant,
so the tests below read host data through `fresh`: core/hostdata.py run again, under its own
name, as a user's deploy imports it.
"""

from __future__ import annotations

import importlib.util
import sys
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from beekeeper.core import hostdata
from beekeeper.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
CPU: dict[str, Any] = {"profile": "cpu-tiny",
                       "source": {"path": "/srv/src.tar.gz", "ref": "lcp0.3.36"}}
DRAFT: dict[str, Any] = {"profile": "q8-dflash-32k",
                         "source": {"git": "https://x/y", "ref": "a" * 40}}


@pytest.fixture
def fresh() -> ModuleType:
    """core/hostdata.py executed anew (the file imported, under the name it is imported by,
    so its functions are those a run of the module makes), left out of sys.modules: the
    rest of the kit keeps the module it imported. For each test (mutmut counts a test as
    calling the declarations only where they are made in it)."""
    spec = importlib.util.spec_from_file_location(hostdata.__name__, hostdata.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved = sys.modules[hostdata.__name__]
    # pydantic resolves the classes' annotations in the module of their name: this one
    sys.modules[hostdata.__name__] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules[hostdata.__name__] = saved
    return module


@pytest.fixture
def imported() -> ModuleType:
    """The module as the kit imported it: for the rules that run when a value is read (the
    tests of what is declared at import take `fresh`)."""
    return hostdata


def refusal(module: ModuleType, data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as e:
        module.parse(data)
    return str(e.value)


# ------------------------------------------------------------------ each key's declaration

def test_the_readmes_key_table_is_what_host_data_declares(fresh):
    """README.md's table (keys, types, defaults, what each does) is the declaration's, as a
    run of `python -m beekeeper.core.hostdata --readme README.md` makes it."""
    text = (ROOT / "README.md").read_text()
    block = text.split(hostdata.README_BEGIN, 1)[1].split(hostdata.README_END, 1)[0]
    assert block.strip() == fresh.markdown_table().strip()
    assert "| `port` | integer 1-65535 | `8083` | the server's port |" in block
    assert "| `draft_sha256` | sha256 | - | the draft model file's sha256, checked on the " \
        "host (a profile with a draft only) |" in block
    assert "| `model_repo` | Hub repo id | - | the model's Hub repository (owner/name), " \
        "instead of the profile's (another one needs model_file) |" in block


def test_a_host_that_gives_nothing_but_its_profile_and_source_gets_the_defaults(fresh):
    got = fresh.parse(CPU)
    assert (got.service_name, got.port, got.bind_address, got.state, got.mode) == \
        ("llm", 8083, "127.0.0.1", "present", "container")
    assert (got.model_dir, got.state_dir, got.cuda_version, got.vram_budget_gib) == \
        ("/srv/beekeeper/models", "/var/lib/beekeeper", "13.2.1", 10.0)
    assert (got.health_timeout_s, tuple(got.stages), got.hf_endpoint, got.install_docker) == \
        (300, hostdata.STAGES, "https://huggingface.co", True)
    assert (got.server_extra_args, got.driver_flavour, got.server_webui) == \
        ((), "open", False)
    gw = fresh.parse({**CPU, "gateway": {}}).gateway
    assert (gw.port, gw.bind_address, gw.check_interval_s, gw.max_body_kib, gw.timeout_s) == \
        (4000, "127.0.0.1", 2, 1024, 600)


# a value of the wrong type for each key: the line names the key, what is wrong with the
# value and the fix, as the key declares them
WRONG_TYPE = {
    "service_name": "{'x': 1} is not a valid name; fix: use lowercase letters, digits and "
                    "dashes, starting with a letter",
    "port": "{'x': 1} is not a TCP port; fix: use an integer from 1 to 65535",
    "bind_address": "{'x': 1} is a dict, not an IP address; fix: write it as a string, e.g. "
                    "'127.0.0.1'",
    "api_key_file": "{'x': 1} is not a file name; fix: point it at a file on the controller "
                    "that holds the key",
    "ctx_size": "{'x': 1} is not a whole number; fix: give a number of tokens, e.g. "
                "ctx_size = 8192 (no quotes)",
    "slots": "{'x': 1} is not a number of slots; fix: give a whole number from 1 to 16, e.g. "
             "slots = 2 (no quotes)",
    "server_extra_args": "{'x': 1} is not a list of strings; fix: e.g. ['--threads', '8']",
    "state": "{'x': 1} is not a service state; fix: use 'present', or 'absent' to stop and "
             "remove the service on the next deploy (its model is kept)",
    "gateway_port": "{'x': 1} is not a TCP port; fix: use an integer from 1 to 65535",
    "model_repo": "{'x': 1} is not a Hub repository id; fix: use 'owner/name', e.g. "
                  "'unsloth/Qwen3.5-9B-GGUF'",
    "model_file": "{'x': 1} is not a .gguf file name; fix: give the file's name in the "
                  "repository, e.g. 'Qwen3.5-9B-Q8_0.gguf'",
    "model_revision": "{'x': 1} is not a revision; fix: give a commit (40 hex digits), or a "
                      "branch or tag the kit pins once",
    "model_sha256": "{'x': 1} is not a sha256; fix: give 64 lowercase hex digits",
    "model_path": "{'x': 1} is a dict, not a path; fix: give an absolute path as a string, "
                  "e.g. '/srv/gguf/my-model-Q8_0.gguf'",
    "model_host_path": "{'x': 1} is a dict, not a path; fix: give an absolute path as a "
                       "string, e.g. '/data/models/my-model-Q8_0.gguf'",
    "model_alias": "{'x': 1} is a dict, not a name; fix: give one word of letters, digits "
                   "and . _ - : / + (at most 64), e.g. model_alias = 'qwen3.5-9b'",
    "draft_repo": "{'x': 1} is not a Hub repository id; fix: use 'owner/name', e.g. "
                  "'unsloth/Qwen3.5-9B-GGUF'",
    "draft_file": "{'x': 1} is not a .gguf file name; fix: give the file's name in the "
                  "repository, e.g. 'Qwen3.5-9B-Q8_0.gguf'",
    "draft_revision": "{'x': 1} is not a revision; fix: give a commit (40 hex digits), or a "
                      "branch or tag the kit pins once",
    "draft_sha256": "{'x': 1} is not a sha256; fix: give 64 lowercase hex digits",
    "mode": "{'x': 1} is not a mode; fix: use 'container' or 'native'",
    "runtime": "{'x': 1} is not a runtime; fix: use runtime = 'systemd', 'compose' or "
               "'supervisor'",
    "services": "{'x': 1} is not a list of dicts; fix: give one dict per service, [] for "
                "none, or drop `services`",
    "model_dir": "{'x': 1} is a dict, not a path; fix: give an absolute path as a string, "
                 "e.g. '/srv/beekeeper/models'",
    "state_dir": "{'x': 1} is a dict, not a path; fix: give an absolute path as a string, "
                 "e.g. '/var/lib/beekeeper'",
    "persistent_root": "{'x': 1} is a dict, not a path; fix: give a folder on the pod's "
                       "volume, e.g. persistent_root = '/workspace/beekeeper', or "
                       "persistent_root = 'none' where the container's own disk is kept "
                       "(Vast.ai)",
    "cuda_version": "{'x': 1} is not a CUDA release; fix: e.g. cuda_version = '13.2.1'",
    "cuda_arch": "{'x': 1} is not a CUDA arch list; fix: e.g. '89' or '89;120'",
    "vram_budget_gib": "{'x': 1} is not a number of GiB above 0 and up to 4096; fix: e.g. "
                       "vram_budget_gib = 10 (no quotes)",
    "health_timeout_s": "{'x': 1} is not a whole number of seconds from 10 to 86400; fix: "
                        "e.g. health_timeout_s = 300 (no quotes)",
    "build_jobs": "{'x': 1} is not a whole number from 1 to 1024; fix: e.g. build_jobs = 4 "
                  "(no quotes), or remove it",
    "install_docker": "{'x': 1} is not True or False; fix: write install_docker = True or "
                      "False (no quotes)",
    "stages": "{'x': 1} is not a prefix of ['provision', 'build', 'model', 'service']; fix: "
              "e.g. ['provision'] or ['provision', 'build']",
    "hf_endpoint": "{'x': 1} is not an http(s) URL; fix: remove it (the Hub, "
                   "https://huggingface.co) or give a mirror's URL",
    "server_webui": "{'x': 1} is not True or False; fix: set True or False",
    "gateway_address": "{'x': 1} is not an IP address or a host name; fix: give the address "
                       "the gateway reaches this host at, e.g. '10.0.0.5'",
    "driver_branch": "{'x': 1} is not a driver branch (a whole number from 100 to 9999); "
                     "fix: e.g. driver_branch = 595 (no quotes), or remove it",
    "container_toolkit_version": "{'x': 1} is not a package version; fix: e.g. '1.17.8-1', "
                                 "or remove it",
    "install_cuda_toolkit": "{'x': 1} is not True or False; fix: write True or False (no "
                            "quotes)",
    "hf_token_file": "{'x': 1} is a dict, not a path; fix: give an absolute path as a "
                     "string, e.g. '/etc/beekeeper/hf_token'",
    "allow_reboot": "{'x': 1} is not True or False; fix: write True or False (no quotes)",
    "use_docker_desktop": "{'x': 1} is not True or False; fix: write True or False (no "
                          "quotes)",
    "upgrade_driver": "{'x': 1} is not True or False; fix: write True or False (no quotes)",
    "cuda_follows_driver": "{'x': 1} is not True or False; fix: write True or False (no "
                           "quotes)",
    "driver_flavour": "{'x': 1} is not a driver flavour; fix: driver_flavour = 'open' "
                      "(Turing and newer) or 'proprietary'",
    # the keys of a mapping key
    "source.git": "{'x': 1} is not a git URL; fix: give the repository's URL, e.g. "
                  "'https://github.com/o/r'",
    "source.path": "{'x': 1} is a dict, not a path; fix: give an absolute path as a string, "
                   "e.g. '/srv/src/llama.cpp.tar.gz'",
    "source.ref": "{'x': 1} is not a string; fix: give the commit (40 hex digits) or "
                  "snapshot name in quotes",
    "gateway.port": "{'x': 1} is not a TCP port; fix: use an integer from 1 to 65535",
    "gateway.bind_address": "{'x': 1} is a dict, not an IP address; fix: write it as a "
                            "string, e.g. '127.0.0.1'",
    "gateway.api_key_file": "{'x': 1} is not a file name; fix: point it at a file on the "
                            "controller that holds the key",
    "gateway.check_interval_s": "{'x': 1} is not a whole number from 1 to 60; fix: e.g. "
                                "check_interval_s = 2 (no quotes)",
    "gateway.max_body_kib": "{'x': 1} is not a whole number from 64 to 65536; fix: e.g. "
                            "max_body_kib = 1024 (no quotes)",
    "gateway.timeout_s": "{'x': 1} is not a whole number from 10 to 86400; fix: e.g. "
                         "timeout_s = 600 (no quotes)",
    "base_images.build": "{'x': 1} is not an image reference; fix: e.g. 'debian:bookworm' "
                         "or 'nvidia/cuda:13.2.1-devel-ubuntu24.04'",
    "base_images.runtime": "{'x': 1} is not an image reference; fix: e.g. "
                           "'debian:bookworm-slim' or "
                           "'nvidia/cuda:13.2.1-runtime-ubuntu24.04'",
    # the repositories' keys declare no problem of their own: the default one
    "nvidia_repos.cuda": "{'x': 1} is not valid; fix: give the mirror's URL as a string",
    "nvidia_repos.cuda_key": "{'x': 1} is not valid; fix: give the key's URL",
    "nvidia_repos.toolkit": "{'x': 1} is not valid; fix: give the mirror's URL as a string",
    "nvidia_repos.toolkit_key": "{'x': 1} is not valid; fix: give the key's URL",
}
# a value that is not a mapping for each mapping key
NOT_A_MAPPING = {
    "source": "5 is not a mapping; fix: set source = {'git': URL, 'ref': COMMIT} or "
              "{'path': FILE, 'ref': NAME}",
    "base_images": "5 is not a mapping of strings to strings; fix: e.g. base_images = "
                   "{'build': 'debian:bookworm', 'runtime': 'debian:bookworm-slim'}",
    "preload_images": "5 is not a mapping of strings to strings; fix: name each image as the "
                      "Dockerfile does, e.g. {'debian:bookworm': '/srv/images/debian.tar'}",
    "gateway": "5 is not a mapping; fix: write gateway = {} for the defaults, or e.g. "
               "gateway = {'port': 4000}",
    "nvidia_repos": "5 is not a mapping of strings to strings; fix: e.g. nvidia_repos = "
                    "{'cuda': 'https://mirror/cuda/repos/ubuntu2404/x86_64'}",
}


def _with(key: str, value: Any) -> dict[str, Any]:
    if "." not in key:
        return {**CPU, key: value}
    mapping, sub = key.split(".")
    inside = dict(CPU["source"]) if mapping == "source" else {}
    return {**CPU, mapping: {**inside, sub: value}}


@pytest.mark.parametrize("key", sorted(WRONG_TYPE))
def test_a_value_of_the_wrong_type_is_refused_with_the_keys_own_words(fresh, key):
    assert refusal(fresh, _with(key, {"x": 1})) == f"host data `{key}`: {WRONG_TYPE[key]}"


@pytest.mark.parametrize("key", sorted(NOT_A_MAPPING))
def test_a_mapping_key_given_a_number_is_refused_with_its_own_words(fresh, key):
    assert refusal(fresh, {**CPU, key: 5}) == f"host data `{key}`: {NOT_A_MAPPING[key]}"


def test_every_key_of_host_data_has_its_wrong_type_line_pinned():
    """The tables above hold every key (the profile's line lists the profiles: below)."""
    keys = {k for k in hostdata.HostData.model_fields if k != "profile"} - set(NOT_A_MAPPING)
    for name, model in (("source", hostdata.SourceData), ("gateway", hostdata.GatewayData),
                        ("base_images", hostdata.BaseImages),
                        ("nvidia_repos", hostdata.NvidiaRepos)):
        keys |= {f"{name}.{k}" for k in model.model_fields}
    assert keys == set(WRONG_TYPE)


def test_a_profile_that_is_not_a_name_is_refused_listing_the_profiles(fresh):
    from beekeeper.core.profiles import PROFILES

    assert refusal(fresh, {**CPU, "profile": 5}) == \
        f"host data `profile`: 5 is not a profile name; fix: use one of: " \
        f"{', '.join(sorted(PROFILES))}"


def test_an_image_key_of_preload_images_that_is_no_image_is_named_as_the_key(fresh):
    assert refusal(fresh, {**CPU, "preload_images": {"a b": "/x.tar"}}) == \
        "host data `preload_images['a b']`: the key 'a b' is not an image reference (each " \
        "key names an image); fix: name each image as the Dockerfile does, e.g. " \
        "{'debian:bookworm': '/srv/images/debian.tar'}"


@pytest.mark.parametrize(("key", "value", "line"), [
    ("draft_repo", "nope", "'nope' is not a Hub repository id; fix: use 'owner/name', e.g. "
     "'unsloth/Qwen3.5-9B-GGUF'"),
    ("draft_revision", "a b", "'a b' is not a revision; fix: give a commit (40 hex digits), "
     "or a branch or tag the kit pins once"),
    ("draft_sha256", "x", "'x' is not a sha256; fix: give 64 lowercase hex digits"),
])
def test_a_draft_profiles_pins_are_refused_in_their_own_words(fresh, key, value, line):
    assert refusal(fresh, {**DRAFT, key: value}) == f"host data `{key}`: {line}"


# ------------------------------------------------------------------ paths

@pytest.mark.parametrize(("key", "example"), [
    ("model_dir", "/srv/beekeeper/models"), ("state_dir", "/var/lib/beekeeper"),
    ("hf_token_file", "/etc/beekeeper/hf_token"),
    ("model_path", "/srv/gguf/my-model-Q8_0.gguf"),
    ("model_host_path", "/data/models/my-model-Q8_0.gguf"),
    ("source.path", "/srv/src/llama.cpp.tar.gz"),
    ("preload_images['debian:bookworm']", "/srv/images/debian-bookworm.tar"),
])
def test_a_relative_path_is_refused_with_an_example_of_the_keys_own(fresh, key, example):
    data = {**CPU, "preload_images": {"debian:bookworm": "rel"}} if key.startswith("preload") \
        else _with(key, "rel")
    assert refusal(fresh, data) == \
        f"host data `{key}`: 'rel' is not an absolute path; fix: use an absolute path such " \
        f"as {example!r}"


def test_a_path_is_read_normalized(fresh):
    got = fresh.parse({**CPU, "model_dir": "/srv/m/", "state_dir": "/var/b/",
                       "model_path": "/srv/m.gguf/", "hf_token_file": "/etc/t/"})
    assert (got.model_dir, got.state_dir, got.model_path, got.hf_token_file) == \
        ("/srv/m", "/var/b", "/srv/m.gguf", "/etc/t")
    assert fresh.parse({**CPU, "source": {"path": "/srv/s.tgz/", "ref": "x"}}).source.path \
        == "/srv/s.tgz"
    assert fresh.parse({**CPU, "preload_images": {"debian:bookworm": "/srv/a.tar/"}}) \
        .preload_images == {"debian:bookworm": "/srv/a.tar"}


# ------------------------------------------------------------------ CUDA release and arch list

@pytest.mark.parametrize(("key", "value", "read"), [
    ("cuda_version", 13.2, "13.2"), ("cuda_version", "12.8", "12.8"),
    ("cuda_version", "13.2.1", "13.2.1"), ("cuda_arch", 89, "89"),
    ("cuda_arch", "89;120", "89;120"), ("cuda_arch", 120, "120"),
])
def test_a_cuda_release_or_arch_list_is_read_as_its_text(fresh, key, value, read):
    assert getattr(fresh.parse({**CPU, key: value}), key) == read


@pytest.mark.parametrize(("key", "value", "line"), [
    ("cuda_version", "x", "'x' is not a CUDA release; fix: e.g. cuda_version = '13.2.1'"),
    ("cuda_version", True, "True is not a CUDA release; fix: e.g. cuda_version = '13.2.1'"),
    # a number of another type is not read by its text: only str, int and float are
    ("cuda_version", Decimal("13.2"),
     "Decimal('13.2') is not a CUDA release; fix: e.g. cuda_version = '13.2.1'"),
    ("cuda_arch", "sm_89", "'sm_89' is not a CUDA arch list; fix: e.g. '89' or '89;120'"),
    ("cuda_arch", False, "False is not a CUDA arch list; fix: e.g. '89' or '89;120'"),
    ("cuda_arch", Decimal("89"), "Decimal('89') is not a CUDA arch list; fix: e.g. '89' or "
     "'89;120'"),
])
def test_a_cuda_release_or_arch_list_that_is_not_one_is_refused(fresh, key, value, line):
    assert refusal(fresh, {**CPU, key: value}) == f"host data `{key}`: {line}"


# ------------------------------------------------------------------ credentials in URLs

FIX = {
    "apt": "give the URL without them and put the login in a root-only file in "
           "/etc/apt/auth.conf.d/ on the host (apt_auth.conf(5): `machine HOST login USER "
           "password PASS`), which apt reads for that repository",
    "git": "give the URL without them and let the host's root in another way that stays off "
           "command lines: an ssh:// URL with a deploy key in /root/.ssh, a git credential "
           "helper on the host (`git config --system credential.helper store`, "
           "/root/.git-credentials mode 600), or source.path (a .tar.gz of a source tree on the "
           "controller)",
    "hub": "give the mirror's URL without them; a mirror that takes a Hub token reads it from "
           "hf_token_file (a root-only file on the host, sent as a bearer token)",
}
RAW_PROBLEM = ("the URL holds user information with a raw '#', '?' or '/' (a URL parser ends "
               "the host there and reads the rest of the password as the port, path, query "
               "or fragment, where it would be printed)")
AMBIGUOUS_PROBLEM = ("the URL has an '@' after its host, which cannot be told from user "
                     "information whose password holds a raw '/', '?' or '#' (`user:12/34@h` "
                     "reads as host `user`, port 12, path `/34@h`), so a password would be "
                     "printed as the path")
PRINTED = ("they would be printed in pyinfra's output and the host's command lines, logs and "
           "files")
USERINFO = "user information (user:password@ or a token as the user name)"
WHERE = {"apt": ("nvidia_repos.cuda", "https://m/x"), "git": ("source.git", "https://x/y"),
         "hub": ("hf_endpoint", "https://m")}


def _url_data(kind: str, url: str) -> dict[str, Any]:
    if kind == "git":
        return {**CPU, "source": {"git": url, "ref": "a" * 40}}
    if kind == "apt":
        return {**CPU, "nvidia_repos": {"cuda": url}}
    return {**CPU, "hf_endpoint": url}


@pytest.mark.parametrize("kind", sorted(FIX))
def test_a_password_in_a_url_is_refused_redacted_with_where_the_login_goes(fresh, kind):
    key, url = WHERE[kind]
    with_login = url.replace("://", "://u:p@")
    redacted = url.replace("://", "://***@")
    assert refusal(fresh, _url_data(kind, with_login)) == \
        f"host data `{key}`: {redacted!r} carries credentials in the URL ({USERINFO}; " \
        f"{PRINTED}); fix: {FIX[kind]}"


@pytest.mark.parametrize("kind", sorted(FIX))
def test_a_password_holding_a_raw_hash_is_refused_unquoted(fresh, kind):
    key, url = WHERE[kind]
    assert refusal(fresh, _url_data(kind, url.replace("://", "://u:pa#ss@"))) == \
        f"host data `{key}`: {RAW_PROBLEM}; fix: keep the login off the URL, in a root-only " \
        f"file: {FIX[kind]}; where a URL must hold a password (a git credential-store " \
        "line), percent-encode it: # as %23, ? as %3F, / as %2F"


@pytest.mark.parametrize("kind", sorted(FIX))
def test_an_at_after_the_host_is_refused_unquoted(fresh, kind):
    key, url = WHERE[kind]
    assert refusal(fresh, _url_data(kind, url.replace("://", "://user:12/34@"))) == \
        f"host data `{key}`: {AMBIGUOUS_PROBLEM}; fix: percent-encode it (in a password / " \
        "as %2F, ? as %3F, # as %23; an '@' in a path as %40), or give the token in a " \
        f"root-only file: {FIX[kind]}"


def test_a_token_in_a_mirrors_query_is_refused_naming_the_parameter(fresh):
    assert refusal(fresh, {**CPU, "hf_endpoint": "https://m/?token=abc"}) == \
        "host data `hf_endpoint`: 'https://m/?token=***' carries credentials in the URL (the " \
        f"secret parameter `token`; {PRINTED}); fix: {FIX['hub']}"


def test_each_secret_a_url_carries_is_named_in_turn(fresh):
    """A login and a secret parameter in one URL: both named, one after the other
    (`x_no_credentials__mutmut_49`: the separator changed)."""
    assert refusal(fresh, {**CPU, "hf_endpoint": "https://u:p@m/?token=abc"}) == \
        "host data `hf_endpoint`: 'https://***@m/?token=***' carries credentials in the URL " \
        f"({USERINFO}; the secret parameter `token`; {PRINTED}); fix: {FIX['hub']}"


@pytest.mark.parametrize("url", ["https://m/x", "ssh://git@m/x", "https://m/x?v=1@2"])
def test_a_url_without_a_secret_passes(fresh, url):
    got = fresh.parse({**CPU, "nvidia_repos": {"cuda": url}})
    assert got.nvidia_repos.cuda == url


def test_a_token_as_the_user_of_a_plain_http_url_is_refused(fresh):
    """http too, not only https, takes a token as the user name."""
    assert refusal(fresh, {**CPU, "hf_endpoint": "http://tok@m"}) == \
        f"host data `hf_endpoint`: 'http://***@m' carries credentials in the URL ({USERINFO}; " \
        f"{PRINTED}); fix: {FIX['hub']}"


# -------------------------------------------------- the other refusals, word for word

@pytest.mark.parametrize(("data", "line"), [
    ({"model_repo": "a/b..c"}, "host data `model_repo`: 'a/b..c' is not a Hub repository id "
     "(huggingface_hub: Cannot have -- or .. in repo_id); fix: use 'owner/name' as the Hub "
     "shows it, e.g. 'unsloth/Qwen3.5-9B-GGUF'"),
    ({"model_repo": "a/b-"}, "host data `model_repo`: 'a/b-' is not a Hub repository id "
     "(huggingface_hub: Repo id must use alphanumeric chars, '-', '_' or '.'. The name cannot "
     "start or end with '-' or '.' and the maximum length is 96); fix: use 'owner/name' as the "
     "Hub shows it, e.g. 'unsloth/Qwen3.5-9B-GGUF'"),
    ({"service_name": "gateway"}, "host data `service_name`: 'gateway' is the gateway's own "
     "unit (beekeeper-gateway.service); fix: name the service otherwise, e.g. 'llm'"),
    ({"stages": ["build"]}, "host data `stages`: ['build'] is not a prefix of ['provision', "
     "'build', 'model', 'service']; fix: e.g. ['provision'] or ['provision', 'build']"),
    ({"hf_endpoint": "https://m/\x7f"}, "host data `hf_endpoint`: 'https://m/\\x7f' holds the "
     "control character '\\x7f'; fix: give the URL without control or non-printable "
     "characters"),
    ({"cuda_arch": "86a"}, "host data `cuda_arch`: '86a': sm_86 has no 'a' variant "
     "(architecture-specific: sm_90a and newer); fix: write '86'"),
    ({"cuda_arch": "89;86a"}, "host data `cuda_arch`: '86a' (in '89;86a'): sm_86 has no 'a' "
     "variant (architecture-specific: sm_90a and newer); fix: write '86'"),
    ({"cuda_arch": "90f"}, "host data `cuda_arch`: '90f': sm_90 has no 'f' variant "
     "(family-specific: sm_100f and newer); fix: write '90'"),
    ({"cuda_arch": "89;90f"}, "host data `cuda_arch`: '90f' (in '89;90f'): sm_90 has no 'f' "
     "variant (family-specific: sm_100f and newer); fix: write '90'"),
    ({"cuda_arch": "89x"}, "host data `cuda_arch`: '89x' ends in 'x', which is no CUDA arch "
     "suffix; fix: write '89'; CUDA's suffixes are 'a' (that GPU only, sm_90a and newer) and "
     "'f' (its family, sm_100f and newer)"),
    ({"cuda_arch": "89;120x"}, "host data `cuda_arch`: '120x' (in '89;120x') ends in 'x', "
     "which is no CUDA arch suffix; fix: write '120'; CUDA's suffixes are 'a' (that GPU only, "
     "sm_90a and newer) and 'f' (its family, sm_100f and newer)"),
    ({"base_images": {"build": "u:pw@reg/img"}}, "host data `base_images.build`: the image "
     "reference holds an '@' that is not a digest's (name@sha256:...): a registry login "
     "(user:password@) there would be printed and written into the Dockerfile; fix: name the "
     "image as 'registry/name:tag' or 'name@sha256:<64 hex digits>'; a registry that needs a "
     "login gets it on the host with `docker login` (root's ~/.docker/config.json), never in "
     "host data"),
    ({"server_extra_args": ["--chat-template=a=b"]}, "host data `server_extra_args`: "
     "'--chat-template=a=b' sets what the kit sets itself (the profile); fix: remove "
     "--chat-template and use the profile (extra arguments may add flags, never replace the "
     "kit's)"),
    ({"runtime": "SUPER_VISOR"}, "host data `runtime`: 'SUPER_VISOR' is not a runtime; fix: "
     "did you mean 'supervisor'? (use runtime = 'systemd', 'compose' or 'supervisor')"),
    ({"profile": "q8_turbo4_64k"}, "host data `profile`: unknown profile 'q8_turbo4_64k'; "
     "fix: did you mean 'q8-turbo4-64k'? (profiles: `beekeeper profiles`)"),
    ({"profile": "Q8 TURBO4 64K"}, "host data `profile`: unknown profile 'Q8 TURBO4 64K'; "
     "fix: did you mean 'q8-turbo4-64k'? (profiles: `beekeeper profiles`)"),
    ({"mode": "Native"}, "host data `mode`: 'Native' is not a mode; fix: did you mean "
     "'native'? (use 'container' or 'native')"),
    ({"bind_address": "x"}, "host data `bind_address`: 'x' is not an IP address; fix: use "
     "127.0.0.1"),
])
def test_a_refusal_says_what_is_wrong_and_the_fix_word_for_word(imported, data, line):
    assert refusal(imported, {**CPU, **data}) == line


def test_a_mirrors_url_is_read_without_its_final_slashes(imported):
    assert imported.parse({**CPU, "hf_endpoint": "https://m/hub///"}).hf_endpoint == "https://m/hub"
    # its slashes only: a path ending in a capital letter keeps it
    assert imported.parse({**CPU, "hf_endpoint": "https://m/HubX/"}).hf_endpoint == \
        "https://m/HubX"


def test_a_docs_pipe_is_escaped_in_the_readmes_table():
    """A `|` in a key's doc would end its cell: written `\\|`."""
    from pydantic.fields import FieldInfo

    info = FieldInfo(default=None, description="a | b", json_schema_extra={"kind": "x"})
    assert hostdata._row("k", info) == "| `k` | x | - | a \\| b |"


def test_every_key_declares_its_type_and_what_it_does():
    """The README's row of a key reads both (a declaration without them would show an empty
    cell: no key is declared so)."""
    models = (hostdata.HostData, hostdata.SourceData, hostdata.GatewayData,
              hostdata.BaseImages, hostdata.NvidiaRepos)
    for model in models:
        for name, info in model.model_fields.items():
            extra = info.json_schema_extra
            assert isinstance(extra, dict) and extra.get("kind"), name
            assert info.description, name


# -------------------------------------------------- python -m beekeeper.core.hostdata

def test_the_module_prints_the_key_table(capsys):
    assert hostdata.main([]) == 0
    assert capsys.readouterr().out == hostdata.markdown_table()


def test_readme_fills_the_block_between_its_markers_and_keeps_the_rest(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text(f"# Title\n\nbefore\n{hostdata.README_BEGIN}\nold table\n"
                      f"{hostdata.README_END}\nafter\n")
    assert hostdata.main(["--readme", str(readme)]) == 0
    assert capsys.readouterr().out == f"{readme}: updated\n"
    assert readme.read_text() == (f"# Title\n\nbefore\n{hostdata.README_BEGIN}\n"
                                  f"{hostdata.markdown_table()}{hostdata.README_END}\nafter\n")
    written = readme.stat().st_mtime_ns
    assert hostdata.main(["--readme", str(readme)]) == 0
    assert capsys.readouterr().out == f"{readme}: already current\n"
    assert readme.stat().st_mtime_ns == written  # not written again


def test_fill_readme_says_whether_it_changed_the_file(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"a{hostdata.README_BEGIN}x{hostdata.README_END}b")
    assert hostdata.fill_readme(str(readme)) is True
    assert readme.read_text() == \
        f"a{hostdata.README_BEGIN}\n{hostdata.markdown_table()}{hostdata.README_END}b"
    assert hostdata.fill_readme(str(readme)) is False



# more refusals, each where a mutant of its rule survived (a near miss that is not near
# enough, a value given as a quoted number, a flag after another, a file name's first
# character, the characters named), word for word
REFUSALS = [
    ({'mode': 'nat'},
     "host data `mode`: 'nat' is not a mode; fix: use 'container' or 'native'"),
    ({'ctx_size': '4096'},
     "host data `ctx_size`: '4096' is a string, not a number; fix: write "
     'ctx_size = 4096 without quotes'),
    ({'ctx_size': '4k'},
     "host data `ctx_size`: '4k' is a string, not a number; fix: write ctx_size "
     '= 8192 without quotes'),
    ({'ctx_size': ' 4096 '},
     "host data `ctx_size`: ' 4096 ' is a string, not a number; fix: write "
     'ctx_size = 4096 without quotes'),
    ({'gateway_address': 'bad host!'},
     "host data `gateway_address`: 'bad host!' is not an IP address or a host "
     'name; fix: give the address the gateway reaches this host at, e.g. '
     "'10.0.0.5' or 'gpu-box.lan'"),
    ({'server_extra_args': ['--x\n']},
     "host data `server_extra_args`: '--x\\n' holds the control character "
     "'\\n'; fix: give each argument without control or non-printable characters"),
    ({'server_extra_args': ['https://u:p@h/x']},
     "host data `server_extra_args`: 'https://***@h/x' carries credentials in a "
     "URL, which would be on the server's command line; fix: give the URL "
     'without them'),
    ({'server_extra_args': ['-hft', 'x']},
     "host data `server_extra_args`: -hft puts a secret on the server's command "
     'line, which every user of the host can read (ps, systemctl status); fix: '
     'remove it and use hf_token_file (the kit downloads the model; the server '
     'needs no Hub token)'),
    ({'server_extra_args': ['--api-key', 'x']},
     "host data `server_extra_args`: --api-key puts a secret on the server's "
     'command line, which every user of the host can read (ps, systemctl '
     'status) and sets what the kit sets itself; fix: remove it and use '
     'api_key_file (the kit passes the key in a root-only env file) (extra '
     "arguments may add flags, never replace the kit's)"),
    ({'server_extra_args': ['--port', '9']},
     "host data `server_extra_args`: '--port' sets what the kit sets itself "
     '(port); fix: remove --port and use port (extra arguments may add flags, '
     "never replace the kit's)"),
    ({'server_extra_args': ['--verbose', '--port', '9']},
     "host data `server_extra_args`: '--port' sets what the kit sets itself "
     '(port); fix: remove --port and use port (extra arguments may add flags, '
     "never replace the kit's)"),
    ({'server_extra_args': ['--system-prompt=hi', '-c', '5']},
     "host data `server_extra_args`: '-c' sets what the kit sets itself "
     '(ctx_size); fix: remove -c and use ctx_size (extra arguments may add '
     "flags, never replace the kit's)"),
    ({'server_extra_args': [1]},
     'host data `server_extra_args`: [1] is not a list of strings; fix: e.g. '
     "['--threads', '8']"),
    ({'model_path': '/srv/m.bin'},
     "host data `model_path`: '/srv/m.bin': its file name does not end .gguf; "
     'fix: a model file name is letters, digits and . _ + - (no space), starts '
     'with a letter or digit and ends .gguf: rename the file, or point a '
     'symlink so named at it'),
    ({'model_path': '/srv/aé.gguf'},
     "host data `model_path`: '/srv/aé.gguf' (written '/srv/a\\xe9.gguf'): its "
     "file name holds 'é'; fix: a model file name is letters, digits and . _ + "
     '- (no space), starts with a letter or digit and ends .gguf: rename the '
     'file, or point a symlink so named at it'),
    ({'model_path': '/srv/a!x.gguf'},
     "host data `model_path`: '/srv/a!x.gguf': its file name holds '!'; fix: a "
     'model file name is letters, digits and . _ + - (no space), starts with a '
     'letter or digit and ends .gguf: rename the file, or point a symlink so '
     'named at it'),
    ({'model_path': '/srv/a b!.gguf'},
     "host data `model_path`: '/srv/a b!.gguf': its file name holds ' ' (a "
     "space), '!'; fix: a model file name is letters, digits and . _ + - (no "
     'space), starts with a letter or digit and ends .gguf: rename the file, or '
     'point a symlink so named at it'),
    ({'model_path': '/srv/-a.gguf'},
     "host data `model_path`: '/srv/-a.gguf': its file name starts with '-'; "
     'fix: a model file name is letters, digits and . _ + - (no space), starts '
     'with a letter or digit and ends .gguf: rename the file, or point a '
     'symlink so named at it'),
    ({'model_file': 'a b.gguf'},
     "host data `model_file`: 'a b.gguf' holds ' ' (a space); fix: a model file "
     'name is letters, digits and . _ + - (no space), starts with a letter or '
     'digit and ends .gguf; for a Hub file so named, download it, rename it, '
     'and give that file as model_path (draft files: rename it in a repository '
     'of yours)'),
    ({'model_alias': ''},
     'host data `model_alias`: empty; fix: give one word of letters, digits and '
     ". _ - : / + (at most 64), e.g. model_alias = 'qwen3.5-9b', or remove it "
     "(the profile's name)"),
    ({'model_alias': 'a b'},
     "host data `model_alias`: 'a b' holds a space (' '), which a client's "
     "`model` and the server's command line cannot carry as one name; fix: give "
     'one word of letters, digits and . _ - : / + (at most 64), e.g. '
     "model_alias = 'qwen3.5-9b'"),
    ({'model_alias': 'a\tb'},
     "host data `model_alias`: 'a\\tb' holds whitespace ('\\t'), which a "
     "client's `model` and the server's command line cannot carry as one name; "
     'fix: give one word of letters, digits and . _ - : / + (at most 64), e.g. '
     "model_alias = 'qwen3.5-9b'"),
    ({'model_alias': 'a\x01b'},
     "host data `model_alias`: 'a\\x01b' holds a control character ('\\x01'), "
     "which a client's `model` and the server's command line cannot carry as "
     'one name; fix: give one word of letters, digits and . _ - : / + (at most '
     "64), e.g. model_alias = 'qwen3.5-9b'"),
    ({'model_alias': 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'},
     'host data `model_alias`: '
     "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' is 65 "
     'characters long; fix: give one word of letters, digits and . _ - : / + '
     "(at most 64), e.g. model_alias = 'qwen3.5-9b'"),
    ({'model_alias': 'a!b'},
     "host data `model_alias`: 'a!b' holds '!'; fix: give one word of letters, "
     "digits and . _ - : / + (at most 64), e.g. model_alias = 'qwen3.5-9b'"),
    ({'model_alias': '-ab'},
     "host data `model_alias`: '-ab' does not start with a letter or digit; "
     'fix: give one word of letters, digits and . _ - : / + (at most 64), e.g. '
     "model_alias = 'qwen3.5-9b'"),
    ({'persistent_root': 'None '},
     "host data `persistent_root`: 'None ' is not a path; fix: write "
     "persistent_root = 'none' (lowercase)"),
    ({'persistent_root': '~/x'},
     "host data `persistent_root`: '~/x' is relative to a home folder (nothing "
     "expands ~ here); fix: spell the folder out, e.g. '/workspace/beekeeper'"),
    ({'persistent_root': '/a/../b'},
     "host data `persistent_root`: '/a/../b' is not a normalized path (`.`, "
     "`..` or `//` in it); fix: write it as '/b'"),
    ({'persistent_root': 'rel'},
     "host data `persistent_root`: 'rel' is not an absolute path; fix: give a "
     "folder on the pod's volume, e.g. persistent_root = "
     "'/workspace/beekeeper', or persistent_root = 'none' where the container's "
     'own disk is kept (Vast.ai)'),
    ({'persistent_root': ''},
     "host data `persistent_root`: empty; fix: give a folder on the pod's "
     "volume, e.g. persistent_root = '/workspace/beekeeper', or persistent_root "
     "= 'none' where the container's own disk is kept (Vast.ai)"),
    ({'cuda': 1},
     'host data `cuda`: unknown key: beekeeper and pyinfra do not read it; fix: '
     'remove it (the keys the kit reads are listed in the README, Host data '
     'keys)'),
    ({'prot': 1},
     'host data `prot`: unknown key: beekeeper and pyinfra do not read it; fix: '
     'did you mean `port`? (or remove it)'),
]


@pytest.mark.parametrize(("data", "line"), REFUSALS)
def test_each_refusal_names_what_is_wrong_in_the_value(imported, data, line):
    assert refusal(imported, {**CPU, **data}) == line


def test_a_gateway_address_is_a_host_name_of_up_to_253_characters(imported):
    name = ".".join(["a" * 63] * 4)[:253]
    assert imported.parse({**CPU, "gateway_address": name}).gateway_address == name
    assert "is not an IP address or a host name" in \
        refusal(imported, {**CPU, "gateway_address": name + "b"})


def test_a_hub_file_name_up_to_255_characters_says_what_in_it_cannot_be_carried(imported):
    longest = "a b" + "x" * 247 + ".gguf"
    assert len(longest) == 255
    assert refusal(imported, {**CPU, "model_file": longest}).split(" holds ")[1].startswith(
        "' ' (a space); fix: a model file name is")
    over = "a b" + "x" * 248 + ".gguf"
    assert "(256 characters) is longer than 255 characters; fix: give the file's name" in \
        refusal(imported, {**CPU, "model_file": over})


def test_a_word_after_a_text_flag_given_with_its_value_is_checked_as_a_flag(imported):
    """`--system-prompt=hi -c 5`: the prompt is in the flag's own word, so `-c` is a flag."""
    assert imported.parse({**CPU, "server_extra_args": ["--system-prompt", "-c"]}) \
        .server_extra_args == ("--system-prompt", "-c")


def test_the_modules_help_names_its_command_and_its_option(capsys):
    with pytest.raises(SystemExit) as e:
        hostdata.main(["--help"])
    assert e.value.code == 0
    said = " ".join(capsys.readouterr().out.split())
    assert said.startswith("usage: python -m beekeeper.core.hostdata [-h] [--readme README.md] "
                           "The host data key table, from the schema. ")
    assert said.endswith(" --readme README.md replace the block between the host-data-keys "
                         "markers in this file")


def test_readme_fills_the_first_block_and_keeps_the_markers_words_after_it(tmp_path):
    """A README that names the markers again after the block (in a code example): the block
    filled is the first, everything after its end marker is kept as written."""
    begin, end = hostdata.README_BEGIN, hostdata.README_END
    readme = tmp_path / "README.md"
    readme.write_text(f"a{begin}x{end}b{begin}c{end}d")
    assert hostdata.fill_readme(str(readme)) is True
    assert readme.read_text() == f"a{begin}\n{hostdata.markdown_table()}{end}b{begin}c{end}d"


@pytest.mark.parametrize(("data", "line"), [
    ({"profile": "q8 f16 4k"}, "host data `profile`: unknown profile 'q8 f16 4k'; fix: did "
     "you mean 'q8-f16-4k'? (profiles: `beekeeper profiles`)"),
    ({"profile": "q8__f16__4k"}, "host data `profile`: unknown profile 'q8__f16__4k'; fix: did "
     "you mean 'q8-f16-4k'? (profiles: `beekeeper profiles`)"),
    # a value's repr of 80 characters is quoted whole, of 81 cut with its length
    ({"model_alias": "x" * 78}, f"host data `model_alias`: '{'x' * 78}' is 78 characters long; "
     "fix: give one word of letters, digits and . _ - : / + (at most 64), e.g. model_alias = "
     "'qwen3.5-9b'"),
    ({"model_alias": "x" * 79}, f"host data `model_alias`: '{'x' * 59}... (79 characters) is "
     "79 characters long; fix: give one word of letters, digits and . _ - : / + (at most 64), "
     "e.g. model_alias = 'qwen3.5-9b'"),
    # a value that is not a string is cut with its length as written, and quoted as written
    ({"stages": ["provision"] * 20}, "host data `stages`: ['provision', 'provision', "
     "'provision', 'provision', 'provis... (260 characters as written) is not a prefix of "
     "['provision', 'build', 'model', 'service']; fix: e.g. ['provision'] or ['provision', "
     "'build']"),
    ({"stages": ["é"]}, "host data `stages`: ['é'] is not a prefix of ['provision', 'build', "
     "'model', 'service']; fix: e.g. ['provision'] or ['provision', 'build']"),
    # where in the data: a mapping's key, a services entry, an item of a list of strings
    ({"gateway": {"port": "x"}}, "host data `gateway.port`: 'x' is not a TCP port; fix: use an "
     "integer from 1 to 65535"),
    ({"server_extra_args": ["a", 5]}, "host data `server_extra_args`: ['a', 5] is not a list "
     "of strings; fix: e.g. ['--threads', '8']"),
    ({"source": {"git": "https://x/y"}}, "host data `source.ref`: missing; fix: pin the source "
     "to a commit or a named snapshot"),
])
def test_more_refusals_word_for_word(imported, data, line):
    assert refusal(imported, {**CPU, **data}) == line


@pytest.mark.parametrize(("entry", "line"), [
    ({"profile": "cpu-tiny", "port": "x"}, "host data `services[0].port`: 'x' is not a TCP "
     "port; fix: use an integer from 1 to 65535"),
    (5, "host data `services[0]`: 5 is not a mapping; fix: give each service as a dict, e.g. "
     "{'service_name': 'llm', 'profile': 'cpu-tiny', 'port': 8083}"),
    ({"profile": "cpu-tiny", "server_extra_args": ["a", 5]}, "host data "
     "`services[0].server_extra_args`: ['a', 5] is not a list of strings; fix: e.g. "
     "['--threads', '8']"),
    ({"profile": "cpu-tiny", "prot": 1}, "host data `services[0].prot`: unknown key: "
     "beekeeper and pyinfra do not read it; fix: did you mean `services[0].port`? (or remove "
     "it)"),
])
def test_a_services_entry_is_named_by_its_place(imported, entry, line):
    assert refusal(imported, {"source": CPU["source"], "services": [entry]}) == line


# ------------------------------------------------------------------ key files

def _key(tmp_path: Path, name: str, body: bytes, mode: int = 0o600) -> str:
    path = tmp_path / name
    path.write_bytes(body)
    path.chmod(mode)
    return str(path)


def test_a_key_file_named_by_nothing_or_with_a_control_character_or_a_tilde(imported):
    fix = "point it at a file on the controller that holds the key"
    assert refusal(imported, {**CPU, "api_key_file": ""}) == \
        f"host data `api_key_file`: '' is not a file name; fix: {fix}"
    assert refusal(imported, {**CPU, "api_key_file": "/k\x01"}) == \
        "host data `api_key_file`: '/k\\x01' holds the control character '\\x01'; fix: give " \
        "the path without control or non-printable characters"
    home = str(Path("~/k").expanduser())
    assert refusal(imported, {**CPU, "api_key_file": "~/k"}) == \
        "host data `api_key_file`: '~/k' starts with ~, which nothing expands here; fix: " \
        f"give the path in full, e.g. {home!r}"


def test_a_key_file_that_is_not_there_empty_or_not_text(imported, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fix = "point it at a file on the controller that holds the key"
    assert refusal(imported, {**CPU, "api_key_file": "rel.key"}) == \
        "host data `api_key_file`: rel.key (relative to the folder pyinfra runs in: " \
        f"{tmp_path / 'rel.key'}) is missing or empty; fix: {fix}"
    empty = _key(tmp_path, "empty.key", b"")
    assert refusal(imported, {**CPU, "api_key_file": empty}) == \
        f"host data `api_key_file`: {empty} is missing or empty; fix: {fix}"
    binary = _key(tmp_path, "bin.key", b"\xff\xfe")
    assert refusal(imported, {**CPU, "api_key_file": binary}) == \
        f"host data `api_key_file`: {binary} is not text; fix: point it at a text file on the " \
        "controller, readable by the user running pyinfra, that holds the key"


def test_a_key_file_the_user_cannot_read_says_why(imported, tmp_path, monkeypatch):
    """As a user other than root sees a key file of root's (mode 600)."""
    key = _key(tmp_path, "root.key", b"k")

    def denied(self: Path, *a: Any, **kw: Any) -> str:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", denied)
    assert refusal(imported, {**CPU, "api_key_file": key}) == \
        f"host data `api_key_file`: {key} cannot be read (PermissionError: Permission denied); " \
        "fix: point it at a text file on the controller, readable by the user running " \
        "pyinfra, that holds the key"


def test_a_key_of_two_lines_or_open_to_others_or_a_gateway_key_with_a_space(imported, tmp_path):
    two = _key(tmp_path, "cr.key", b"a\rb")
    assert refusal(imported, {**CPU, "api_key_file": two}) == \
        f"host data `api_key_file`: the key in {two} holds more than one line; fix: keep the " \
        "key alone on one line in the file (several keys, one a user: the gateway's " \
        "api_key_file)"
    shared = _key(tmp_path, "open.key", b"k", 0o644)
    assert refusal(imported, {**CPU, "api_key_file": shared}) == \
        f"host data `api_key_file`: {shared} is readable by others; fix: chmod 600 {shared}"
    spaced = _key(tmp_path, "sp.key", b"a b")
    assert imported.parse({**CPU, "api_key_file": spaced}).api_key_file == spaced  # a server's
    assert refusal(imported, {**CPU, "gateway": {"api_key_file": spaced}}) == \
        f"host data `gateway.api_key_file`: the key in {spaced} holds a space or a control " \
        "character; fix: use a key of printable characters without spaces, e.g. `openssl rand " \
        "-hex 32`"


@pytest.mark.parametrize("image", ["u:pw@reg/img", "u:p[w@reg/img", "u[1]:pw@reg/img"])
def test_a_login_in_an_image_key_of_preload_images_is_never_quoted(imported, image):
    """The key is the secret: the refusal names the mapping alone, whatever brackets the
    password holds (a bracket in it must not be taken for where the key's name ends)."""
    line = refusal(imported, {**CPU, "preload_images": {image: "/srv/a.tar"}})
    assert line.startswith("host data `preload_images`: the image reference holds an '@' "
                           "that is not a digest's")
    assert "u:p" not in line and "u[1]" not in line


# ------------------------------------------------------------------ the first pass of 2026-12-05

def test_an_unknown_key_is_named_before_a_bad_value_in_either_order(imported):
    """pydantic lists a declared key's bad value before an unknown key; the kit names the
    unknown key first (a misspelt key is the likelier cause, and its value may be the one
    meant for the key it resembles)."""
    for data in ({**CPU, "port": "x", "prot": 1}, {**CPU, "prot": 1, "port": "x"}):
        assert refusal(imported, data) == "host data `prot`: unknown key: beekeeper and " \
            "pyinfra do not read it; fix: did you mean `port`? (or remove it)"
    assert refusal(imported, {**CPU, "port": "x"}).startswith("host data `port`: 'x' ")


def test_none_for_a_key_where_none_means_nothing_is_one_line(imported):
    assert refusal(imported, {**CPU, "source": {"git": None, "ref": "a" * 40}}) == \
        "host data `source.git`: None is not a value for it; fix: give a value, or remove " \
        "the key"


def test_a_mapping_of_another_kind_is_read_as_the_dict_it_holds(imported):
    """pyinfra hands group data's dicts as they were written; a read-only mapping (or any
    Mapping that is no dict) is read as its items, not refused as no dict."""
    from types import MappingProxyType

    source = {"path": "/srv/src.tar.gz", "ref": "lcp0.3.36"}
    got = imported.parse({**CPU, "source": MappingProxyType(source)})
    assert got.source == imported.parse({**CPU, "source": source}).source
    assert (got.source.path, got.source.ref) == ("/srv/src.tar.gz", "lcp0.3.36")


def test_a_model_dir_with_a_colon_is_one_line(imported):
    assert refusal(imported, {**CPU, "model_dir": "/srv/a:b"}) == \
        "host data `model_dir`: '/srv/a:b' holds ':', Docker's --volume separator; fix: use " \
        "a folder without ':'"


def test_an_unknown_profile_with_no_near_name_lists_every_profile(imported):
    from beekeeper.core.profiles import PROFILES

    assert refusal(imported, {**CPU, "profile": "zzzzzzzzzzz"}) == \
        "host data `profile`: unknown profile 'zzzzzzzzzzz'; fix: use one of: " \
        + ", ".join(sorted(PROFILES))


def test_a_path_with_a_control_character_or_the_root_folder_is_one_line(imported):
    assert refusal(imported, {**CPU, "model_dir": "/srv/a\nb"}) == \
        "host data `model_dir`: '/srv/a\\nb' holds the control character '\\n'; fix: give " \
        "the path without control or non-printable characters"
    assert refusal(imported, {**CPU, "model_dir": "/"}) == \
        "host data `model_dir`: '/' is the root folder; fix: use a folder such as " \
        "'/srv/beekeeper/models'"


def test_a_path_of_the_longest_length_passes_and_one_longer_is_refused(imported):
    most = imported.MAX_PATH_LEN
    longest = "/" + "a" * (most - 1)
    assert imported.parse({**CPU, "model_dir": longest}).model_dir == longest
    assert refusal(imported, {**CPU, "model_dir": longest + "a"}) == \
        f"host data `model_dir`: the path is {most + 1} characters long; fix: use a path of " \
        f"at most {most} characters"


@pytest.mark.parametrize("path", ["/srv/X", "/srv/modelsX", "/srv/models/"])
def test_a_normalized_path_ending_in_any_letter_or_a_slash_passes(imported, path):
    assert imported.parse({**CPU, "model_dir": path}).model_dir == path.rstrip("/")


# ------------------------------------------------------------------ the key helpers' rules

# each key declared by whole() (tcp_port's keys too): its bounds, read by pydantic (the
# Field's ge and le) and by its type words; a fresh run of the module, as whole() and key()
# pass the bounds on when the class bodies are built
WHOLE = {"port": (1, 65535), "gateway_port": (1, 65535), "slots": (1, 16),
         "health_timeout_s": (10, 86400), "build_jobs": (1, 1024),
         "gateway.port": (1, 65535), "gateway.check_interval_s": (1, 60),
         "gateway.max_body_kib": (64, 65536), "gateway.timeout_s": (10, 86400)}


def _read(data: Any, key: str) -> Any:
    for part in key.split("."):
        data = getattr(data, part)
    return data


def test_every_whole_number_key_has_its_bounds_pinned():
    keys = {k for k, f in hostdata.HostData.model_fields.items()
            if str((f.json_schema_extra or {}).get("kind", "")).startswith("integer ")}
    keys |= {f"gateway.{k}" for k, f in hostdata.GatewayData.model_fields.items()
             if str((f.json_schema_extra or {}).get("kind", "")).startswith("integer ")}
    assert keys == set(WHOLE)


@pytest.mark.parametrize("key", sorted(WHOLE))
def test_a_whole_number_key_takes_its_bounds_and_refuses_one_past_either(fresh, key):
    """lo and hi pass; lo - 1 and hi + 1 are refused in the key's own words (the problem and
    fix of its wrong-type line, about the number given)."""
    lo, hi = WHOLE[key]
    for value in (lo, hi):
        assert _read(fresh.parse(_with(key, value)), key) == value
    for value in (lo - 1, hi + 1):
        assert refusal(fresh, _with(key, value)) == \
            f"host data `{key}`: {WRONG_TYPE[key].replace(repr({'x': 1}), str(value), 1)}"


@pytest.mark.parametrize(("data", "key"), [
    ({**CPU, "bind_address": "not-an-ip"}, "bind_address"),
    ({**CPU, "gateway": {"bind_address": "not-an-ip"}}, "gateway.bind_address"),
    ({"source": CPU["source"], "services": [{"profile": "cpu-tiny",
                                              "bind_address": "not-an-ip"}]},
     "services[0].bind_address"),
])
def test_an_address_that_is_no_ip_is_refused_in_listen_ons_words_where_it_is_given(
        fresh, data, key):
    """bind_address (a server's, the gateway's, a services entry's) is declared by
    listen_on(): its problem and fix, word for word, and its default loopback."""
    assert refusal(fresh, data) == \
        f"host data `{key}`: 'not-an-ip' is not an IP address; fix: use 127.0.0.1"
    assert fresh.parse({**CPU, "gateway": {}}).gateway.bind_address == "127.0.0.1"
