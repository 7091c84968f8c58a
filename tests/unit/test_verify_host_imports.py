"""What `beekeeper verify --on-host` runs on a host imports with the host's kit alone: the
stdlib and the verify venv's wheels (hostverify.REQUIREMENTS), never the controller's
pydantic or pyinfra. (The network tier's Python 3.10 test installs those wheels; this one
runs offline, each time: an import of core/hostdata.py from verify_main broke every on-host
verify, seen by the integration tier.)"""

import subprocess
import sys

from beekeeper.core.paths import KIT_ROOT

BLOCK = """
import runpy, sys
for name in ("pydantic", "pydantic_core", "pyinfra", "jinja2", "click", "gevent"):
    sys.modules[name] = None  # an import of it raises ImportError, as on the host
sys.argv = ["verify_main", "--help"]
runpy.run_module("beekeeper.verify_main", run_name="__main__")
"""


def test_verify_main_runs_without_the_controllers_packages():
    p = subprocess.run([sys.executable, "-c", BLOCK], capture_output=True, text=True,
                       cwd=KIT_ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "--slots" in p.stdout and "--profile" in p.stdout
