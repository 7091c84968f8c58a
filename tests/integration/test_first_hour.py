"""
The README's first screen, followed on the sandbox host as written (issue 34): deploy from
nothing (`pyinfra ... deploy.py`), the first chat request with the README's own curl line run
on the box (only the model name is the sandbox profile's), and `beekeeper verify` given the
host alone, which reads the profile and port of what was deployed. The clone and install
steps are what `./scripts/demo.sh` does from a fresh clone (docs/testing.md's measured time).
"""

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import BIN, ROOT, first_deploy, sandbox_exec

pytestmark = pytest.mark.integration

README = ROOT / "README.md"
SERVED = "cpu-tiny"  # the sandbox's profile, the model name its server answers to


def readme_curl() -> str:
    """The README's first chat request: the `curl` command of its first screen, its line
    continuations joined."""
    text = README.read_text()
    m = re.search(r"^curl -s http://127\.0\.0\.1:8083/v1/chat/completions.*?(?<!\\)$", text,
                  re.M | re.S)
    assert m, "the README shows no first chat request"
    return m.group(0).replace("\\\n", " ")


def readme_model() -> str:
    return json.loads(re.search(r"-d '(\{.*\})'", readme_curl()).group(1))["model"]


def first_request(run_on_box, model: str = SERVED) -> dict:
    """The README's curl, run on the box by `run_on_box(cmd)`, with `model` for the README's;
    its JSON reply."""
    cmd = readme_curl().replace(f'"model": "{readme_model()}"', f'"model": "{model}"')
    p = run_on_box(cmd)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def check_reply(reply: dict) -> str:
    """What the README says the reply holds: the text at choices[0].message.content, usage
    and the server's timings."""
    text = reply["choices"][0]["message"]["content"]
    assert isinstance(text, str) and text.strip(), reply
    assert reply["usage"]["completion_tokens"] > 0 and reply["usage"]["prompt_tokens"] > 0
    assert "timings" in reply and reply["model"]
    return text


@pytest.fixture(scope="module")
def deployed(fresh_sandbox):
    return first_deploy("the README's first screen")


def test_the_readmes_first_request_gets_a_reply(deployed):
    assert readme_model() == "q8-turbo4-64k"  # the default profile's alias, as written
    text = check_reply(first_request(sandbox_exec))
    print(f"[figure] the README's first request on the sandbox: {text!r}")


def test_the_readmes_openai_client_lines_print_the_reply(deployed):
    """The README's Python lines, with the sandbox's model, through a tunnel to the box."""
    pytest.importorskip("openai")
    from beekeeper.sandbox import load_state, ssh_options
    from beekeeper.tunnel import ssh_tunnel

    code = re.search(r"```python\n(from openai import OpenAI.*?)```", README.read_text(),
                     re.S).group(1)
    with ssh_tunnel(ssh_options(load_state()), 8083) as url:
        code = code.replace("http://127.0.0.1:8083", url).replace(readme_model(), SERVED)
        # the controller's python (the kit's venv), where `pip install openai` put it
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=300)
    assert p.returncode == 0 and p.stdout.strip(), p.stderr


def test_verify_given_the_host_alone_reads_what_was_deployed(deployed, tmp_path):
    p = subprocess.run([str(BIN / "beekeeper"), "verify", "--sandbox", "--suite", "smoke",
                        "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    d = json.loads(sandbox_exec("cat /etc/beekeeper/llm/deployed.json").stdout)
    assert (f"verify: profile {d['profile']}, port {d['port']}, from what was deployed on "
            "sandbox") in p.stdout
    report = json.loads(next(Path(tmp_path).rglob("report.json")).read_text())
    assert report["profile"] == d["profile"] and report["url"].startswith("http://127.0.0.1:")
    assert shlex.split(readme_curl())[0] == "curl"
