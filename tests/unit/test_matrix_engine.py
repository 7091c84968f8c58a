"""The config matrix asks verify for the engine suite, over the ssh that reaches the host, so
each row is judged against its own llama-bench (it was INCOMPLETE on every row without it).
Offline: the options run_suites gets, and run_matrix's call with verify's run_suites replaced
by a recorder (named as such: no server, no host), and the rows it ranks."""

from contextlib import contextmanager

from beekeeper import matrix
from beekeeper.verify.engine import SshShell
from beekeeper.verify.judge import Check
from beekeeper.verify.report import Report


def test_matrix_asks_for_the_engine_suite_over_the_hosts_ssh():
    assert matrix.SUITES[0] == "engine" and set(matrix.SUITES) >= {"decode", "ttft", "niah"}
    opts = matrix.suite_options("gpu-box", ["-p", "2222", "root@gpu-box"])
    shell = opts["shell"]
    assert isinstance(shell, SshShell) and shell.ssh == ["-p", "2222", "root@gpu-box"]
    assert shell.root and shell.label == "gpu-box"  # systemctl stop/start need root
    assert not opts["where"].local and "ssh tunnel" in opts["where"].why
    assert matrix.suite_options("gpu-box", None)["shell"] is None


def _report(profile: str, checks: list[Check], decode_tok_s: float) -> Report:
    from beekeeper.verify.client import RequestRecord
    from beekeeper.verify.results import DecodeResult, NiahCase, NiahResult

    rep = Report(profile=profile, url="http://127.0.0.1:1", started_utc="", budget_mib=10240,
                 requested=["decode", "ttft", "niah"])
    rep.checks = checks
    rec = RequestRecord(ok=True, status_code=200, error=None, t_send_s=0.0)
    rep.suites.decode = [DecodeResult(1024, 160, decode_tok_s, None, [], rec)]
    rep.suites.niah = NiahResult(1000, [NiahCase(1, 0.5, 1000, 1000, "1234567", "1234567",
                                                 ["1234567"], True)] * 10)
    return rep


def test_run_matrix_passes_the_engine_and_ranks_on_the_verdicts(tmp_path, monkeypatch):
    """A recorder stands in for verify's run_suites: it records the call and returns a
    report whose checks were written by hand (one row PASSED, one FAILED its engine check)."""
    import beekeeper.verify.suites as suites

    calls = []
    verdicts = {"cpu-tiny": ("PASS", 46.5), "cpu-smollm": ("FAIL", 60.0)}

    def recorder(client, prof, names, **kw):
        calls.append((prof.name, names, kw))
        st, tok_s = verdicts[prof.name]
        return _report(prof.name, [Check("decode.vs_engine@1024", st, "written by hand"),
                                   Check("ttft.vs_engine", "PASS", "written by hand"),
                                   Check("niah.pass", "PASS", "written by hand")], tok_s)

    @contextmanager
    def tunnel():
        yield "http://127.0.0.1:1"

    monkeypatch.setattr(suites, "run_suites", recorder)
    rows, best, folder = matrix.run_matrix(
        ["cpu-smollm", "cpu-tiny"], lambda name: 0, tunnel, None, tmp_path, "sandbox",
        ssh=["-p", "2222", "root@127.0.0.1"])
    assert [c[0] for c in calls] == ["cpu-smollm", "cpu-tiny"]
    for _, names, kw in calls:
        assert names[0] == "engine" and isinstance(kw["shell"], SshShell)
        assert kw["shell"].ssh == ["-p", "2222", "root@127.0.0.1"]
    by = {r.profile: r for r in rows}
    assert by["cpu-tiny"].verdict == "PASSED" and by["cpu-smollm"].verdict == "FAILED"
    # the faster row FAILED against its own engine: not recommended, the slower PASSED one is
    assert not by["cpu-smollm"].eligible and best is by["cpu-tiny"]
    md = (folder / "matrix.md").read_text()
    assert "verify FAILED" in md


def test_the_matrix_command_hands_run_matrix_the_hosts_ssh(monkeypatch):
    """`beekeeper matrix --ssh ...` gave run_matrix no ssh, so every row's engine suite ran
    without a shell (no baseline, INCOMPLETE). A recorder stands in for run_matrix and for
    the ssh read of the host's record (no host here)."""
    import subprocess

    from beekeeper import cli

    seen = {}

    def recorder(*args, **kw):
        seen.update(kw)
        return [], None, "folder"

    monkeypatch.setattr(matrix, "run_matrix", recorder)
    reads = []

    def read(*a, **kw):
        reads.append(kw)
        return subprocess.CompletedProcess(a, 1, "", "")

    monkeypatch.setattr(subprocess, "run", read)
    cli.main(["matrix", "--profiles", "cpu-tiny", "--ssh", "-p 2222 root@gpu-box",
              "--inventory", "inventories/home.py", "--host", "gpu-box"])
    assert seen["ssh"] == ["-p", "2222", "root@gpu-box"]
    # the record's read over ssh ends (it had no time limit: a host that never answered hung
    # the command before its first row)
    assert [kw.get("timeout") for kw in reads] == [120]


def test_a_host_that_never_answers_the_record_read_is_one_line_not_a_traceback(monkeypatch, capsys):
    import subprocess

    from beekeeper import cli

    def hangs(*a, **kw):
        raise subprocess.TimeoutExpired(a[0], kw["timeout"])

    monkeypatch.setattr(subprocess, "run", hangs)
    rc = cli.main(["matrix", "--profiles", "cpu-tiny", "--ssh", "-p 2222 root@gpu-box",
                   "--inventory", "inventories/home.py", "--host", "gpu-box"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert err.startswith("beekeeper matrix: the host did not answer in 120 s reading ")
    assert "-p 2222 root@gpu-box" in err


def test_a_row_without_the_servers_peak_is_not_called_within_the_budget():
    """A driver with no per-process figure (WSL2): the row's VRAM is not measured, neither
    within nor over the budget (it read `(None or 0) <= budget`: within)."""
    from beekeeper.verify.report import Report, SuiteResults
    from beekeeper.verify.vram import VramResult

    row = matrix.Row(profile="p", summary="s", deployed=True)
    vr = VramResult(peak_process_mib=None, peak_delta_mib=40.0)
    rep = Report(profile="p", url="u", started_utc="t", budget_mib=10240.0,
                 suites=SuiteResults(vram=vr), requested=[])
    matrix._fill_row(row, rep)
    assert (row.peak_vram_mib, row.within_budget, row.vram_note) == (None, None, "not measured")
