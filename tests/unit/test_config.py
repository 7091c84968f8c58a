import pytest

from beekeeper.core.config import load_host_config
from beekeeper.core.errors import ConfigError
from beekeeper.core.profiles import HfSource

GOOD = {"profile": "cpu-tiny", "source": {"path": "/srv/src.tar.gz", "ref": "lcp0.3.36"}}


def with_(**kw):
    """GOOD with `kw`; with `services`, less GOOD's top-level profile (each entry names its
    own: a top-level one beside them is refused)."""
    base = {k: v for k, v in GOOD.items() if not ("services" in kw and k == "profile")}
    return {**base, **kw}


def test_good_data_loads_with_secure_defaults():
    cfg = load_host_config(GOOD)
    assert cfg.data.mode == "container"
    assert cfg.service.data.bind_address == "127.0.0.1"
    assert cfg.service.data.port == 8083
    assert cfg.service.model.sha256 == cfg.service.profile.model.sha256


@pytest.mark.parametrize(
    ("data", "key", "fix"),
    [
        (with_(profile="nope"), "`profile`", "use one of"),
        ({"source": GOOD["source"]}, "`profile`", "set profile"),
        (with_(port=70000), "`port`", "1 to 65535"),
        (with_(port="8083"), "`port`", "1 to 65535"),
        (with_(mode="vm"), "`mode`", "'container' or 'native'"),
        (with_(source=None), "`source`", "'git'"),
        (with_(source={"git": "https://x/y", "ref": "main"}), "`source.ref`", "commit"),
        (with_(source={"path": "/x"}), "`source.ref`", "pin"),
        (with_(source={"git": "https://x/y", "ref": "ba1fdce59"}), "`source.ref`",
         "git rev-parse ba1fdce59"),
        (with_(model_repo="not a repo", model_file="x.gguf"), "`model_repo`", "owner/name"),
        (with_(model_repo="a/b", model_file="x.bin"), "`model_file`", ".gguf"),
        (with_(model_revision="main"), "`model_repo`", "model_repo and model_file together"),
        (with_(hf_endpoint="ftp://mirror"), "`hf_endpoint`", "http(s)"),
        (with_(model_sha256="abc"), "`model_sha256`", "64 lowercase hex"),
        (with_(bind_address="0.0.0.0"), "`bind_address`", "api_key_file"),
        (with_(bind_address="localhost"), "`bind_address`", "127.0.0.1"),
        (with_(ctx_size=10**6), "`ctx_size`", "lower ctx_size"),
        (with_(model_dir="models"), "`model_dir`", "absolute"),
        (with_(cuda_arch="sm_89"), "`cuda_arch`", "'89'"),
        (with_(services=[{"profile": "cpu-tiny", "port": 1}, {"profile": "cpu-tiny",
                                                               "port": 1, "service_name": "b"}]),
         "`services`", "own port"),
    ],
)
def test_bad_data_names_the_key_and_the_fix(data, key, fix):
    with pytest.raises(ConfigError) as e:
        load_host_config(data)
    msg = str(e.value)
    assert key in msg and fix in msg
    assert "\n" not in msg


def test_own_hub_model_overrides_the_profiles_and_drops_its_hash():
    cfg = load_host_config({"profile": "q8-turbo4-64k", "model_repo": "me/m-GGUF",
                            "model_file": "m-Q8_0.gguf",
                            "source": {"git": "https://x/y", "ref": "a" * 40}})
    m = cfg.service.model
    assert (m.filename, m.source.repo, m.source.revision) == ("m-Q8_0.gguf", "me/m-GGUF", "main")
    assert m.sha256 is None and m.size_bytes == 0  # pinned from the Hub before the deploy


def test_another_hub_repo_without_its_file_is_refused_naming_the_file_key():
    """model_repo (or draft_repo) of another repository than the profile's, without
    model_file: the profile's file name was kept, to be looked for in the user's repository
    (and a failed pin named model_revision). Refused at load, naming the file key."""
    git = {"git": "https://x/y", "ref": "a" * 40}
    cases = [
        ({"profile": "q8-turbo4-64k", "model_repo": "you/my-finetune-GGUF"}, "model_file",
         "model_repo 'you/my-finetune-GGUF'", "Qwen3.5-9B-Q8_0.gguf"),
        ({"services": [{"profile": "q8-dflash-32k", "draft_repo": "you/my-draft-GGUF"}]},
         "services[0].draft_file", "draft_repo 'you/my-draft-GGUF'",
         "Qwen3.5-9B-DFlash-q8_0.gguf"),
    ]
    for data, key, given, kept in cases:
        with pytest.raises(ConfigError) as e:
            load_host_config({**data, "source": git})
        msg = str(e.value)
        role = key.rsplit(".", 1)[-1]
        assert msg.startswith(f"host data `{key}`: missing beside {given}, another repository "
                              "than the profile's"), msg
        assert f"({kept}) would be looked for; fix: set {role} to the GGUF's name in that " \
            "repository" in msg and "\n" not in msg
    # the profile's own repository again, or with its file: the profile's file, as before
    same = load_host_config({"profile": "q8-turbo4-64k", "model_repo": "unsloth/Qwen3.5-9B-GGUF",
                             "source": git}).service.model
    assert (same.filename, same.source) == ("Qwen3.5-9B-Q8_0.gguf",
                                            HfSource("unsloth/Qwen3.5-9B-GGUF", "main"))
    own = load_host_config({"profile": "q8-turbo4-64k", "model_repo": "you/my-finetune-GGUF",
                            "model_file": "Qwen3.5-9B-Q8_0.gguf", "source": git}).service.model
    assert own.source == HfSource("you/my-finetune-GGUF", "main") and own.sha256 is None


def test_dflash_profile_starts_with_beellamas_draft_flags():
    cfg = load_host_config({"profile": "q8-dflash-32k",
                            "source": {"git": "https://x/y", "ref": "a" * 40}})
    svc = cfg.service
    args = svc.profile.server.args("/m/a.gguf", f"/m/{svc.draft.filename}")
    i = args.index("-md")
    assert args[i:i + 8] == ["-md", "/m/Qwen3.5-9B-DFlash-q8_0.gguf", "--spec-type", "dflash",
                             "-cd", "256", "-ngld", "99"]


def test_non_loopback_bind_with_key_file_is_allowed(tmp_path):
    key = tmp_path / "key"
    key.write_text("s3cret\n")
    key.chmod(0o600)
    cfg = load_host_config(with_(bind_address="0.0.0.0", api_key_file=str(key)))
    assert cfg.service.data.api_key_file == str(key)
    key.chmod(0o644)
    with pytest.raises(ConfigError, match=r"`api_key_file`.*readable by others.*chmod 600"):
        load_host_config(with_(bind_address="0.0.0.0", api_key_file=str(key)))
    with pytest.raises(ConfigError, match="missing or empty"):
        load_host_config(with_(api_key_file=str(tmp_path / "nope")))


@pytest.mark.parametrize("text", ["alice,bob", '"quoted"', 'ab"c'])
def test_a_server_key_llama_server_would_read_as_a_list_is_refused(tmp_path, text):
    # llama-server splits LLAMA_API_KEY as a CSV row (common/arg.cpp, parse_csv_row): the key
    # the smoke check and the gateway send whole would get 401
    key = tmp_path / "key"
    key.write_text(text + "\n")
    key.chmod(0o600)
    with pytest.raises(ConfigError, match=r"`api_key_file`.*holds ',' or '\"'.*list of keys"):
        load_host_config(with_(api_key_file=str(key)))
    key.write_text("has a space inside\n")  # one field of the row: a key as it is
    assert load_host_config(with_(api_key_file=str(key))).service.data.api_key_file


def test_a_refusal_names_a_services_entry_by_its_place_in_the_list():
    """An entry with state 'absent' before it still counts: services[2] is the third entry
    (the rules between services once named it by its place among the present ones)."""
    data = with_(services=[
        {"service_name": "old", "profile": "cpu-tiny", "state": "absent"},
        {"service_name": "a", "profile": "cpu-tiny", "port": 8001},
        {"service_name": "b", "profile": "q8-turbo4-64k", "port": 8002}])
    with pytest.raises(ConfigError, match=r"`services\[2\]\.profile`"):
        load_host_config(data)
