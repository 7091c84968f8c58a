"""The heartbeat of long steps (operations/shell.py): what its line shows while a build
runs. Run by /bin/sh as the host runs it."""

import subprocess

from beekeeper.operations.shell import with_heartbeat

# what the H200 build's heartbeat showed at 510 s (benchmarks/h200/2026-12-03-deploy/): the
# last line of a compiler warning, not where the build was
WARNING = ("/src/ggml/src/ggml-cuda/fattn.cu(12): warning #177-D: variable \\\"x\\\" was "
           "declared but never referenced\n      int x;\n          ^\n\n")


def heartbeat_lines(tmp_path, script: str) -> list[str]:
    log = tmp_path / "logs" / "build.log"
    run = subprocess.run(["/bin/sh", "-c", with_heartbeat(script, str(log), "building x",
                                                          every_s=1)],
                         capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    return [x for x in run.stdout.splitlines() if x.startswith("[beekeeper] building x")]


def test_a_heartbeat_shows_the_builds_last_progress_line_not_a_warnings_caret(tmp_path):
    lines = heartbeat_lines(tmp_path, (
        "echo '[ 44%] Building CUDA object fattn-vec-a.cu.o'; "
        "echo '[ 45%] Building CUDA object fattn-vec-b.cu.o'; "
        f"printf '{WARNING}'; sleep 1.5"))
    assert lines, "no heartbeat line"
    assert "last: [ 45%] Building CUDA object fattn-vec-b.cu.o (log: " in lines[-1], lines


def test_without_a_progress_line_a_heartbeat_shows_the_last_line_that_is_not_blank(tmp_path):
    lines = heartbeat_lines(tmp_path, "echo 'Step 3/7 : RUN make'; echo; sleep 1.5")
    assert lines and "last: Step 3/7 : RUN make (log: " in lines[-1], lines
