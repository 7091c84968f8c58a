"""The quickstarts (docs/quickstart-*.md) and docs/own-model.md, held to the kit (issue 43;
fast offline tier: no host, no network): the host data they give is accepted as written, the
figures they quote are the planner's and the code's, and every time to a first reply is one the
linked record holds. Their shell commands are classified and the offline ones run by
test_readme.py."""
from __future__ import annotations

import ipaddress
import json
import os
import re
import runpy
import shlex
import subprocess
import types
from pathlib import Path

import pytest

from beekeeper.core import cudacompat, gateway as gw
from beekeeper.core.config import load_host_config
from beekeeper.core.paths import DEFAULT_PORT
from beekeeper.core.planner import predict
from beekeeper.core.profiles import PROFILES, SUITES

from .harness import ENV_PREFIX, page_commands, python_blocks

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
QUICKSTARTS = ("quickstart-wsl2.md", "quickstart-ssh.md", "quickstart-pod.md")


def flat(name: str) -> str:
    return " ".join((DOCS / name).read_text().split())


def group_data() -> dict:
    """group_data/all.py as pyinfra gives it to every host."""
    return {k: v for k, v in runpy.run_path(str(ROOT / "group_data" / "all.py")).items()
            if not k.startswith("_") and not isinstance(v, types.ModuleType)}


def test_the_readme_first_screen_points_to_each_quickstart_and_the_command_page():
    text = (ROOT / "README.md").read_text()
    first_screen = text.split("## From clone to a first chat reply", 1)[0]
    for page in (*QUICKSTARTS, "own-model.md", "commands.md"):
        assert f"](docs/{page})" in first_screen, page
    assert "URL-OF-THIS-REPOSITORY" not in text
    assert "](own-model.md)" in (DOCS / "quickstart-pod.md").read_text()


@pytest.mark.parametrize("page", QUICKSTARTS)
def test_each_quickstart_goes_from_clone_to_a_first_reply(page):
    """Its commands, in order: into the clone, set-up, the venv, a dry run, a deploy, the first
    request, verify."""
    from .harness import shell_commands as commands

    said = [c.text for c in commands(DOCS / page)]
    steps = [r"^cd beekeeper$", r"scripts/setup\.sh", r"^\. \.venv/bin/activate$",
             r"pyinfra .*deploy\.py.* --dry$", r"pyinfra (-y )?inventories/\S+ deploy\.py"
             r"( --ssh-user \S+ --sudo)?$|deploy\.py --sudo$",
             r"^curl -s http://127\.0\.0\.1:8083/v1/chat/completions", r"^beekeeper verify "]
    at = [next((i for i, t in enumerate(said) if re.search(step, t)), -1) for step in steps]
    assert all(i >= 0 for i in at) and at == sorted(at), list(zip(steps, at, strict=True))
    assert "## How long it takes" in (DOCS / page).read_text()


# --- every command of each quickstart is one the kit knows ----------------------------------
# (tests/integration/test_quickstarts.py runs them on the sandbox hosts, in the same order)

def written_inventories(page: str) -> set[str]:
    """Inventory files a page's python block tells the user to save (`# inventories/x.py`)."""
    return {m for b in python_blocks(page)
            for m in re.findall(r"^# (inventories/[\w-]+\.py)\b", b, re.M)}


# pyinfra options that take a value (the next word)
PYINFRA_VALUED = {"--ssh-user", "--data", "--limit", "--ssh-port", "--ssh-key", "--user"}
# commands that are not the kit's: the tools a user runs around it, by first word
OTHERS = {"cd", "mkdir", "chmod", "ssh", "ssh-copy-id", "sudo", "systemctl", "wsl.exe",
          "nvidia-smi", "openssl", "brew", "curl"}


def parse_cli_arg(value: str) -> object:
    """A `--data` value as pyinfra reads it (pyinfra_cli.util.parse_cli_arg, which is not
    imported here: pyinfra_cli patches the process with gevent, which stops pytest-xdist's
    workers): true, false, an integer, JSON, else the text."""
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return json.loads(value)
    except ValueError:
        return value


def _pyinfra_line(page: str, text: str, env: dict[str, str]) -> None:
    from beekeeper.core.hostdata import HostData

    words = shlex.split(text)
    assert words[0] == "pyinfra", text
    positional, data, i = [], {}, 1
    while i < len(words):
        w = words[i]
        if w in PYINFRA_VALUED:
            if w == "--data":
                k, _, v = words[i + 1].partition("=")
                data[k] = parse_cli_arg(v)
            i += 2
            continue
        if not w.startswith("-"):
            positional.append(w)
        i += 1
    inventory, script = positional  # pyinfra INVENTORY SCRIPT, nothing else
    assert (ROOT / inventory).is_file() or inventory in written_inventories(page), \
        f"{page}: {text}: no {inventory} in the kit, nor one the page writes"
    assert script in ("deploy.py", "uninstall.py") and (ROOT / script).is_file(), text
    for k in data:
        assert k in HostData.model_fields, f"{page}: {text}: --data {k} is no host data key"
    if data:
        load_host_config({**group_data(), **data})  # accepted as given (a refusal raises)
    source = (ROOT / inventory).read_text() if (ROOT / inventory).is_file() else ""
    for var in env:
        assert var.startswith("BEEKEEPER_") and f'"{var}"' in source, \
            f"{page}: {text}: {inventory} reads no {var}"


def _beekeeper_line(page: str, text: str) -> None:
    from .harness import flags_of, help_text, subcommands

    words = shlex.split(text)
    assert words[1] in subcommands(), f"{page}: {text}"
    assert flags_of(text) <= flags_of(help_text("beekeeper", words[1])), f"{page}: {text}"
    if "--profile" in words:
        assert words[words.index("--profile") + 1] in PROFILES, text
    if "--suite" in words:
        suites = set(words[words.index("--suite") + 1].split(","))
        assert suites <= {*SUITES, "all", "gateway"}, text


@pytest.mark.parametrize("page", QUICKSTARTS)
def test_every_command_of_a_quickstart_is_one_the_kit_knows(page):
    """Each command, as written: a `pyinfra` line names an inventory the kit has (or one the
    page has you write), deploy.py or uninstall.py, host data keys it accepts and variables
    its inventory reads; a `beekeeper` line a sub-command, its options, a profile; a script
    of the kit's that is there; an `export` a variable an inventory reads; a request to the
    port the page's server listens on, naming a model it serves."""
    cmds = page_commands(page)
    assert len(cmds) >= 8, cmds
    exported: dict[str, str] = {}
    served = set(PROFILES)
    for text in cmds:
        env_part, rest = ENV_PREFIX.match(text).groups()
        env = dict(a.split("=", 1) for a in env_part.split())
        first = rest.split()[0]
        if first == "pyinfra":
            _pyinfra_line(page, rest, {**env, **exported})
        elif first == "beekeeper":
            _beekeeper_line(page, rest)
        elif first.startswith("./scripts/"):
            script = ROOT / first
            assert script.is_file() and script.stat().st_mode & 0o111, text
            assert set(env) <= {"PYTHON"}, text
        elif text in (". .venv/bin/activate",
                      f"export -p | grep ' BEEKEEPER_' > {POD_ENV}"):  # kept on the volume
            pass
        elif first == "export":
            var, _, value = rest.split(" ", 1)[1].partition("=")
            exported[var] = value
            assert var.startswith("BEEKEEPER_"), text
            assert f'"{var}"' in (ROOT / "inventories" / "gpu-container.py").read_text(), text
            if var == "BEEKEEPER_MODEL_ALIAS":
                served.add(value)
        else:
            assert first in OTHERS, f"{page}: `{text}`: a command this test does not know"
        if first == "curl":
            port = int(re.search(r"https?://[\w.]+:(\d+)/", text).group(1))
            assert port in (DEFAULT_PORT, 4000), text
            body = re.search(r"-d '(\{.*\})'", text)
            if body:
                assert json.loads(body.group(1))["model"] in served, text
        if first == "ssh" and " -L " in text:
            local, _host, remote = re.search(r"-L (\d+):([\d.]+):(\d+)", text).groups()
            assert int(remote) == DEFAULT_PORT == int(local), text


# --- the times: each quoted figure is in the record the page links ---------------------------

# a figure quoted in seconds -> (the record it comes from, how the record spells it)
RECORDS = {
    "535.9": ("benchmarks/h200/2026-12-04-pods/README.md", "**535.9**"),
    "27.1": ("benchmarks/h200/2026-12-04-pods/README.md", "**27.1**"),
    "0.2": ("benchmarks/h200/2026-12-04-pods/README.md", "| 16 tokens | 0.2 |"),
    "3.8": ("benchmarks/h200/2026-12-04-pods/README.md", "healthy 3.8 s after it started"),
    "597": ("benchmarks/h200/2026-11-30-build/README.md", "**597 s**"),
    "686": ("docs/testing.md", "passed in 686 s"),
    "655": ("README.md", "655 s"),
}


@pytest.mark.parametrize("page", QUICKSTARTS)
def test_every_time_a_quickstart_quotes_is_in_its_record(page):
    section = (DOCS / page).read_text().split("## How long it takes", 1)[1]
    quoted = re.findall(r"\*{0,2}(\d[\d,.]*)\*{0,2} s\b", section)
    assert quoted, "no time quoted"
    for figure in quoted:
        assert figure in RECORDS, f"{page}: {figure} s is in no record this test knows"
        record, spelled = RECORDS[figure]
        assert spelled in (ROOT / record).read_text(), f"{record} does not say {spelled}"
        named = "README" if record == "README.md" else record.removesuffix("/README.md")
        assert named.removeprefix("docs/") in section, \
            f"{page} quotes {figure} s without naming {record}"


# --- the WSL2 page: the CUDA versions the kit can follow --------------------------------------

def test_the_wsl2_page_names_the_cuda_the_kit_can_follow():
    text = flat("quickstart-wsl2.md")
    target = cudacompat.major_minor(load_host_config(group_data()).data.cuda_version)
    follow = sorted(mm for mm in cudacompat.NEWEST_RELEASE if mm < target)
    names = [cudacompat.spell(mm) for mm in follow]
    releases = [cudacompat.NEWEST_RELEASE[mm] for mm in follow]
    assert ", ".join(names[:-1]) + f" or {names[-1]}" in text
    assert "(nvidia/cuda " + ", ".join(releases[:-1]) + f" or {releases[-1]})" in text
    assert "--data cuda_follows_driver=true" in text
    assert "596.21" in (ROOT / "inventories" / "home.py").read_text()  # the reference box


# a run of CUDA versions from 12.8 ("12.8, 12.9, 13.0 or 13.1"), never a release ("12.8.1")
CUDA_RUN = re.compile(r"(?<![\d.])12\.8(?![\d.])(?:,? (?:or |and )?\d+\.\d+(?![\d.]))+")


@pytest.mark.parametrize("path", ["README.md", "docs/quickstart-wsl2.md",
                                  "docs/quickstart-ssh.md", "inventories/home.py"])
def test_every_list_of_cuda_the_kit_follows_is_the_tables(path):
    """Each place that lists the CUDA versions a driver may report for cuda_follows_driver
    lists what cudacompat.NEWEST_RELEASE holds below the default cuda_version's, all of them
    (inventories/home.py's WSL2 example said "12.8, 12.9 or 13.0" while its docstring, the
    README and the quickstart said 12.8 to 13.1); comments are read as one line."""
    target = cudacompat.major_minor(load_host_config(group_data()).data.cuda_version)
    names = [cudacompat.spell(mm) for mm in sorted(cudacompat.NEWEST_RELEASE) if mm < target]
    text = " ".join(line.strip().lstrip("# ")
                    for line in (ROOT / path).read_text().splitlines())
    runs = CUDA_RUN.findall(" ".join(text.split()))
    assert runs, f"{path} lists no CUDA versions from 12.8"
    for run in runs:
        assert re.findall(r"\d+\.\d+", run) == names, f"{path}: {run!r}, not {names}"


# --- the SSH page: the family inventory, as written ------------------------------------------

@pytest.fixture
def family(tmp_path, monkeypatch):
    (block,) = [b for b in python_blocks("quickstart-ssh.md") if "inventories/family.py" in b]
    ns: dict = {}
    exec(block, ns)  # noqa: S102 - the page's own example
    monkeypatch.chdir(tmp_path)  # the key file, made as the page says, relative to here
    (tmp_path / "keys").mkdir()
    key = tmp_path / "keys" / "family.key"
    key.write_text("0123456789abcdef0123456789abcdef\n")
    key.chmod(0o600)
    assert "mkdir -p keys && openssl rand -hex 32 > keys/family.key && chmod 600 " \
           "keys/family.key" in flat("quickstart-ssh.md")
    return [(name, {**group_data(), **data}) for name, data in ns["gpu_boxes"]]


def test_the_family_inventory_is_accepted_and_fits_its_budget_and_a_24_gb_card(family):
    ((_name, data),) = family
    cfg = load_host_config(data)
    assert [s.name for s in cfg.services] == ["qwen", "qwen-fast"]
    a, b = (predict(PROFILES[s.profile.name]).total_mib for s in cfg.services)
    text = flat("quickstart-ssh.md")
    assert f"plan {a + b:,.0f} MiB together" in text  # the example's own comment
    assert a + b <= data["vram_budget_gib"] * 1024 < 24 * 1024  # within the budget it sets
    assert a + b + 1024 <= 24 * 1024  # preflight's sum against a 24 GB card, 1 GiB to spare
    # why it raises the budget: over the one every host gets
    assert a + b > load_host_config(group_data()).data.vram_budget_gib * 1024


def test_the_family_gateway_routes_both_models_by_the_names_the_page_gives(family):
    """The gateway the page sets up: one keyed endpoint on the host's address, both servers
    behind it on loopback, routed by the names the page tells people to send."""
    ((name, data),) = family
    cfg = load_host_config(data)
    assert all(ipaddress.ip_address(s.data.bind_address).is_loopback for s in cfg.services)
    assert cfg.data.gateway is not None and cfg.data.gateway.api_key_file == "keys/family.key"
    plan = gw.plan(name, [(name, data)])
    assert plan.left_out == []
    routes = {r.model: [(u.address, u.port) for u in r.upstreams] for r in plan.routes}
    assert routes == {"q8-turbo4-64k": [("127.0.0.1", 8083)],
                      "q4km-f16-32k": [("127.0.0.1", 8084)]}
    text = flat("quickstart-ssh.md")
    base = f"http://{cfg.data.gateway.bind_address}:{cfg.data.gateway.port}/v1"
    assert f"`{base}`" in text
    for model in routes:
        assert f"`{model}`" in text
    # the page's requests go to that endpoint, with the key, and name a routed model
    from .harness import shell_commands as commands
    curls = [c.text for c in commands(DOCS / "quickstart-ssh.md")
             if c.text.startswith(f"curl -s {base}/")]
    assert len(curls) == 2, curls
    for curl in curls:
        assert '-H "Authorization: Bearer $(head -n 1 keys/family.key)"' in curl
    sent = json.loads(re.search(r"-d '(\{.*\})'", curls[1]).group(1))["model"]
    assert sent in routes
    # the page keeps the profiles' names; model_alias renames a server and its route alike
    assert "model_alias" not in str(data)
    aliased = {**data, "services": [{**s, "model_alias": "x" + s["service_name"]}
                                    for s in data["services"]]}
    assert {r.model for r in gw.plan(name, [(name, aliased)]).routes} == {
        "x" + s["service_name"] for s in data["services"]}


def test_the_family_page_says_what_the_gateway_needs_as_the_code_does():
    text = flat("quickstart-ssh.md")
    assert "(2.4 on Ubuntu 22.04, 2.6 on Debian 12: a keyed gateway runs on either" in text
    # issue 43: a keyed gateway runs on Ubuntu 22.04's HAProxy 2.4
    (major, minor), _why = gw.HAPROXY_NEEDS
    assert (major, minor) <= (2, 4)
    assert gw.haproxy_refusal("2.4.24-0ubuntu0.22.04.1") is None
    assert gw.haproxy_refusal("2.6.12-1+deb12u3") is None


# --- the pod page: its variables, through the pod inventory -----------------------------------

def test_the_pod_pages_variables_are_host_data_the_kit_accepts(monkeypatch):
    text = (DOCS / "quickstart-pod.md").read_text()
    step3 = text.split("## 3.", 1)[1].split("## 4.", 1)[0]
    exports = dict(re.findall(r"^export (BEEKEEPER_\w+)=(.*)$", step3, re.M))
    assert set(exports) >= {"BEEKEEPER_MODEL", "BEEKEEPER_MODEL_SHA256", "BEEKEEPER_MODEL_ALIAS"}
    assert exports["BEEKEEPER_MODEL_SHA256"] == \
        f"$(sha256sum {exports['BEEKEEPER_MODEL']} | cut -d' ' -f1)"
    for var, value in exports.items():
        monkeypatch.setenv(var, "a" * 64 if var == "BEEKEEPER_MODEL_SHA256" else value)
    for var in ("BEEKEEPER_HOST", "BEEKEEPER_SOURCE", "BEEKEEPER_PORT", "BEEKEEPER_BIND_ADDRESS",
                "BEEKEEPER_API_KEY_FILE", "BEEKEEPER_PERSISTENT_ROOT"):
        monkeypatch.delenv(var, raising=False)
    inventory = runpy.run_path(str(ROOT / "inventories" / "gpu-container.py"))
    ((host, data),) = inventory["gpu_containers"]
    assert host == "@local"
    cfg = load_host_config({**group_data(), **data})
    (svc,) = cfg.services
    assert svc.alias == exports["BEEKEEPER_MODEL_ALIAS"] == "my-finetune"
    assert svc.profile.name == exports["BEEKEEPER_PROFILE"]
    assert cfg.data.vram_budget_gib == float(exports["BEEKEEPER_VRAM_BUDGET_GIB"])
    assert f'"model": "{svc.alias}"' in text  # the first request names the alias
    assert "pyinfra inventories/gpu-container.py deploy.py --dry" in text
    assert "--sudo" not in [w for line in re.findall(r"^pyinfra .*$", text, re.M)
                            for w in line.split()]


POD_ENV = "/workspace/beekeeper.env"


def test_the_pod_pages_variables_are_kept_on_the_volume_and_read_back(tmp_path):
    """Each block of the pod page that exports host data writes it to the volume's file last
    (an `export` alone is gone with the SSH session and the pod's restart); what bash writes
    there, read back by a new shell, gives each variable its value (quotes in it too)."""
    text = (DOCS / "quickstart-pod.md").read_text()
    save = f"export -p | grep ' BEEKEEPER_' > {POD_ENV}"
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    for block in (b for b in blocks if "export BEEKEEPER_" in b):
        lines = [x for x in block.splitlines() if x.startswith("export")]
        assert lines[-1] == save, block
    assert f". {POD_ENV}" in text
    env = tmp_path / "beekeeper.env"
    script = save.replace(POD_ENV, str(env))
    subprocess.run(["bash", "-c", f"export BEEKEEPER_MODEL_ALIAS=\"it's mine\"; {script}"],
                   check=True, env={"PATH": os.environ["PATH"]})
    got = subprocess.run(["env", "-i", "bash", "-c", f". {env}; bash -c 'echo "
                          "\"$BEEKEEPER_MODEL_ALIAS\"'"], capture_output=True, text=True)
    assert got.stdout == "it's mine\n", got


def test_the_pod_pages_keyed_bind_is_accepted(tmp_path, monkeypatch):
    """Step 6's key and bind, over step 3's variables, are host data the kit accepts."""
    text = (DOCS / "quickstart-pod.md").read_text()
    step6 = text.split("## 6.", 1)[1].split("## 7.", 1)[0]
    exports = dict(re.findall(r"^export (BEEKEEPER_\w+)=(.*)$", step6, re.M))
    assert exports["BEEKEEPER_BIND_ADDRESS"] == "0.0.0.0"
    key = tmp_path / Path(exports["BEEKEEPER_API_KEY_FILE"]).name
    key.write_text("0123456789abcdef0123456789abcdef\n")
    key.chmod(0o600)
    assert f"chmod 600 {exports['BEEKEEPER_API_KEY_FILE']}" in step6
    monkeypatch.delenv("BEEKEEPER_MODEL", raising=False)
    monkeypatch.setenv("BEEKEEPER_BIND_ADDRESS", exports["BEEKEEPER_BIND_ADDRESS"])
    monkeypatch.setenv("BEEKEEPER_API_KEY_FILE", str(key))
    data = runpy.run_path(str(ROOT / "inventories" / "gpu-container.py"))["gpu_containers"][0][1]
    (svc,) = load_host_config({**group_data(), **data}).services
    assert svc.data.bind_address == "0.0.0.0" and svc.data.api_key_file == str(key)


def test_the_pod_pages_driver_branches_are_cudas_minor_version_floors():
    text = flat("quickstart-pod.md")
    assert f"**{cudacompat.MINOR_COMPAT_BRANCH[13]} or newer** runs any CUDA 13.x" in text
    assert f"**{cudacompat.MINOR_COMPAT_BRANCH[12]} or newer** a CUDA 12.x" in text


# --- own-model.md: its host data, as written --------------------------------------------------

def test_own_model_host_data_examples_are_accepted(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # model_path is read on the controller, relative to here
    blocks = python_blocks("own-model.md")
    assert len(blocks) == 3
    for block in blocks:
        entry = eval(block.split("\n", 1)[1])  # noqa: S307 - the page's own dict literal
        if "model_path" in entry:  # absolute on the controller: the same name, here
            assert entry["model_path"].startswith("/")
            local = tmp_path / Path(entry["model_path"]).name
            local.write_bytes(b"GGUF\x03\x00\x00\x00")
            entry["model_path"] = str(local)
        cfg = load_host_config({**group_data(), **entry})
        (svc,) = cfg.services
        assert svc.alias == "my-finetune"
        if "ctx_size" in entry:
            assert svc.profile.server.ctx_size == entry["ctx_size"]


def test_own_model_states_the_trained_context_the_check_uses():
    text = flat("own-model.md")
    trained = {PROFILES[n].model.n_ctx_train for n in PROFILES if n.startswith("q")}
    assert trained == {262144}
    assert "(262,144 tokens for the Qwen3.5 profiles)" in text
    for name, profile in PROFILES.items():
        if profile.backend == "cuda" and profile.server.draft_model is None:
            assert f"`{name}`" in text, f"own-model.md does not place {name}"
