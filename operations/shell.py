"""
Shell commands of the kit's operations: output streamed to the terminal, and a heartbeat
line on long steps.
"""

from __future__ import annotations

import shlex

from pyinfra.api import StringCommand

q = shlex.quote


class StreamedCommand(StringCommand):
    """A shell command whose output reaches the user's terminal as it comes, without
    pyinfra's -v: long steps print a heartbeat line (see with_heartbeat) and nothing else."""

    def execute(self, state, host, connector_arguments):  # type: ignore[no-untyped-def]
        connector_arguments.update(self.connector_arguments)
        return host.run_shell_command(self, print_output=True,
                                      print_input=state.print_input, **connector_arguments)


def via_tmp(dest: str, suffix: str = ".tmp") -> tuple[str, str]:
    """A temporary file beside `dest` (quoted), and the rename that puts it over `dest`
    once written: a reader never sees half a file."""
    tmp = q(dest + suffix)
    return tmp, f"mv -f {tmp} {q(dest)}"


def with_heartbeat(cmd: str, log: str, what: str, every_s: int = 30) -> str:
    """Run cmd (a list of commands too) in the background with its whole output in `log`,
    printing a line every `every_s`.
    `what` and `log` reach the shell only single-quoted (they may carry host data)."""
    ql, qw = q(log), q(what)
    # the line a heartbeat shows: among the log's last 40 lines, the last progress line of
    # cmake or make ("[ 45%] Building ..."), else the last line that is not blank (a
    # compiler warning's last line is a bare caret: "      |     ^")
    last = (f"tail -n 40 {ql} 2>/dev/null | awk '/\\[ *[0-9]+%\\]/ {{p=$0}} "
            "NF {l=$0} END {print (p != \"\" ? p : l)}'")
    return (
        f"mkdir -p {q(log.rsplit('/', 1)[0])} && : > {ql} && "
        f"( {{ {cmd}; }} >> {ql} 2>&1; echo $? > {q(log + '.rc')} ) & pid=$!; "
        f"start=$(date +%s); while kill -0 $pid 2>/dev/null; do sleep {every_s}; "
        f"kill -0 $pid 2>/dev/null || break; "
        f"echo \"[beekeeper] \"{qw}\": $(( $(date +%s) - start )) s, "
        f"last: $({last} | cut -c1-100) (log: \"{ql}\")\"; done; "
        f"wait $pid; rc=$(cat {q(log + '.rc')}); "
        f"if [ \"$rc\" != 0 ]; then tail -n 30 {ql}; "
        f"echo {qw}\" failed (exit $rc); full log: \"{ql} >&2; exit \"$rc\"; fi"
    )
