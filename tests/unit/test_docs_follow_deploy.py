"""
docs/architecture.md's "One host's problem stops only that host" says what deploy.py does with
an error raised while a host's operations are prepared: since the KitBug change (issue 33),
every error fails that host alone, the kit's own refusals as they are and any other as a bug
line. The section must not say that another error stops the run.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _section() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    return " ".join(text.split("## One host's problem stops only that host", 1)[1].split())


def test_the_architecture_doc_says_every_error_fails_one_host_as_deploy_py_does():
    # what deploy.py (and uninstall.py) do: prepare the host through tasks/hostfail.py, which
    # fails it on its own errors, then any other as KitBug, each on this host only
    for entry, prepare in (("deploy.py", "deploy_host"), ("uninstall.py", "uninstall_host")):
        assert (ROOT / entry).read_text().rstrip().endswith(f"\non_this_host({prepare})")
    deploy = (ROOT / "tasks" / "hostfail.py").read_text()
    assert re.search(r"except BeekeeperError as e:\s+fail_this_host\(e\)", deploy)
    assert re.search(r"except Exception as e:.*\n\s+fail_this_host\(KitBug\.of\(e\)\)", deploy)
    doc = _section()
    assert "still stops the run" not in doc
    assert "ConfigError, PreflightError" in doc and "`KitBug`" in doc
    assert '"this is a bug in beekeeper: please report it with this line"' in doc
    assert "this is a bug in " in deploy and "beekeeper: please report it with this line" in deploy
