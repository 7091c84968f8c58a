"""scripts/test.sh's `follow`: a lane's log printed as it grows, until the lane ends, and the
lane's exit status; the function itself is taken from the script and run by bash."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _follow() -> str:
    text = (ROOT / "scripts" / "test.sh").read_text()
    found = re.search(r"^follow\(\) \{.*?^\}$", text, re.S | re.M)
    assert found, "scripts/test.sh defines follow()"
    return found.group(0)


def _run(body: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = f"set -euo pipefail\ncd {tmp_path}\n{_follow()}\n{body}"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)


def test_a_lane_that_ended_before_it_is_followed_is_printed_whole_with_its_status(tmp_path):
    p = _run("""( printf 'one\\ntwo\\n' > lane.log; exit 3 ) & lane=$!
sleep 1  # ended, its id free for another process
if follow "$lane" lane.log; then echo "rc=0"; else echo "rc=$?"; fi""", tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "one\ntwo\nrc=3\n"


def test_a_running_lane_is_printed_to_its_last_line(tmp_path):
    p = _run(""": > lane.log
( for i in 1 2 3; do echo "line $i" >> lane.log; sleep 0.3; done; echo last >> lane.log ) & lane=$!
if follow "$lane" lane.log; then echo "rc=0"; else echo "rc=$?"; fi""", tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "line 1\nline 2\nline 3\nlast\nrc=0\n"


def test_the_script_follows_each_lane_with_it_not_with_the_lanes_own_id():
    text = (ROOT / "scripts" / "test.sh").read_text()
    assert re.findall(r'^if follow "\$(\w+)" "\$(\w+)"', text, re.M) == [
        ("integ", "integ_log"), ("side", "side_log")]
    assert not re.search(r'tail [^\n]*--pid="\$(integ|side)"', text)
