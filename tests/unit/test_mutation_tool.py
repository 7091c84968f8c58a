"""scripts/mutation.py's own rules (docs/testing.md, "Mutation testing"): the copy's pytest
gets the same node ids at every collection in one process, and mutmut's mutants/ follows the
copy."""

import ast
import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    """The script as a module, its configured modules as the checkout's pyproject.toml says
    them (in mutmut's copy the script reads the copy's own, rewritten one)."""
    spec = importlib.util.spec_from_file_location("mutation_tool", ROOT / "scripts" / "mutation.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.configured = lambda: ["beekeeper/core/planner.py", "beekeeper/verify/judge.py"]
    return mod


PYPROJECT = """[tool.mutmut]
only_mutate = [
    "beekeeper/core/planner.py",
    "beekeeper/verify/judge.py",
]
pytest_add_cli_args = ["-p", "no:cacheprovider", "--import-mode=append"]
"""


def test_the_copys_pytest_loads_the_ids_plugin_and_the_deselected_tests():
    tool = _tool()
    text = tool.tree_pyproject(PYPROJECT, ["tests/unit/test_x.py::test_y[a b]"])
    line = next(x for x in text.splitlines() if x.startswith("pytest_add_cli_args = "))
    assert line.startswith('pytest_add_cli_args = ["-p", "beekeeper_mutation_ids", "--deselect", '
                           '"tests/unit/test_x.py::test_y[a b]", "-p", "no:cacheprovider"'), line
    assert 'only_mutate = ["src/beekeeper/core/planner.py", "src/beekeeper/verify/judge.py"]' \
        in text
    assert 'pytest_add_cli_args = ["-p", "beekeeper_mutation_ids", "-p"' in \
        tool.tree_pyproject(PYPROJECT)


# mutmut runs its stats, its list of tests and its clean run as pytest sessions in one process;
# a test of stacked parametrize marks whose explicit id holds a backslash, as
# tests/unit/test_host_data.py's test_unrepresentable_path_is_refused has
TWICE = textwrap.dedent('''
    import sys
    import pytest

    class Ids:
        def __init__(self):
            self.ids = []

        def pytest_collection_modifyitems(self, items):
            self.ids += [i.nodeid for i in items]

    runs = []
    for _ in range(2):
        ids = Ids()
        pytest.main(["-q", "--collect-only", "-p", "no:cacheprovider", *sys.argv[2:],
                     sys.argv[1]], plugins=[ids])
        runs.append(ids.ids)
    print(repr(runs))
''')
STACKED = textwrap.dedent('''
    import pytest

    @pytest.mark.parametrize("key", ["a", "b"], ids=["a", "b"])
    @pytest.mark.parametrize("value", ["/srv/m\\u0085", "/srv/\\tm"],
                             ids=[repr("/srv/m\\u0085"), repr("/srv/\\tm")])
    def test_stacked(key, value):
        pass
''')


def _collect_twice(tmp_path: Path, *args: str) -> list[list[str]]:
    (tmp_path / "test_stacked.py").write_text(STACKED)
    (tmp_path / "twice.py").write_text(TWICE)
    tool = _tool()
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / f"{tool.PLUGIN}.py").write_text(tool.PLUGIN_TEXT)
    out = subprocess.run([sys.executable, "twice.py", "test_stacked.py", *args], cwd=tmp_path,
                         capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(plugin), "PATH": "/usr/bin:/bin"})
    return ast.literal_eval(out.stdout.strip().splitlines()[-1])


def test_a_second_collection_in_one_process_keeps_the_node_ids_with_the_plugin(tmp_path):
    tool = _tool()
    first, second = _collect_twice(tmp_path, "-p", tool.PLUGIN)
    assert len(first) == 4 and first == second
    assert "test_stacked.py::test_stacked['/srv/m\\\\x85'-a]" in first


def test_without_the_plugin_pytest_escapes_the_ids_again(tmp_path):
    """The cause of the clean run's exit 4 (issue 45): the second collection's node id of
    '/srv/m\\x85' doubles its backslash. Should pytest stop doing it, this test says so and
    the plugin may go."""
    first, second = _collect_twice(tmp_path)
    assert first != second
    assert "test_stacked.py::test_stacked['/srv/m\\\\\\\\x85'-a]" in second


def test_mutants_follow_the_copy_and_keep_mutmuts_own_files(tmp_path):
    tool = _tool()
    tree = tmp_path
    (tree / "src/beekeeper/core").mkdir(parents=True)
    (tree / "mutants/src/beekeeper/core").mkdir(parents=True)
    (tree / "mutants/tests").mkdir(parents=True)
    (tree / "src/beekeeper/core/errors.py").write_text("new\n")
    (tree / "mutants/src/beekeeper/core/errors.py").write_text("old\n")
    (tree / "mutants/tests/test_gone.py").write_text("gone\n")
    (tree / "mutants/src/beekeeper/core/planner.py").write_text("mutated\n")
    (tree / "mutants/src/beekeeper/core/planner.py.meta").write_text("{}")
    (tree / "mutants/mutmut-stats.json").write_text("{}")
    tool.follow_in_mutants(tree, {"src/beekeeper/core/errors.py",
                                  "src/beekeeper/core/planner.py"})
    assert (tree / "mutants/src/beekeeper/core/errors.py").read_text() == "new\n"
    assert not (tree / "mutants/tests/test_gone.py").exists()
    assert (tree / "mutants/src/beekeeper/core/planner.py").read_text() == "mutated\n"
    assert (tree / "mutants/src/beekeeper/core/planner.py.meta").exists()
    assert (tree / "mutants/mutmut-stats.json").exists()


def test_a_runs_row_of_the_score_table_says_its_figures_commit_day_and_wall_time():
    from datetime import UTC, datetime

    tool = _tool()
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    assert tool.table_row("core/planner.py", 620, 600, 10, 0, "98.4%", "abcdef1234", 600.0) == \
        f"| `core/planner.py` | 620 | 600 | 20 | 10 | 0 | 98.4% | abcdef1 | {day} | 10 min |"
    assert tool.table_row("x.py", 3, 3, 0, 0, "100.0%", None, 42.4).endswith(
        f"| 0 | 0 | 0 | 100.0% | working tree | {day} | 42 s |")


# --- the tool's fixes of 2026-12-05, each failing on the behaviour before it ----------------

def _copy_at(tool, monkeypatch, tree: Path) -> None:
    monkeypatch.setattr(tool, "TREE", tree)
    monkeypatch.setattr(tool, "STATS_DIGEST", tree.parent / "stats-source")


def test_mutmuts_stats_are_collected_anew_when_the_code_or_the_tests_changed(tmp_path,
                                                                            monkeypatch):
    """mutmut adds the stats of new tests only: a test it knew that now reaches a function it
    did not reach then is never run against that function's mutants (false survivors). The
    stats go whenever src/ or tests/ differ from what they were collected on."""
    tool = _tool()
    tree = tmp_path / "tree"
    _copy_at(tool, monkeypatch, tree)
    code, test = tree / "src/beekeeper/core/planner.py", tree / "tests/unit/test_planner.py"
    stats = tree / "mutants/mutmut-stats.json"
    for p, text in ((code, "def f():\n    return 1\n"), (test, "def test_f():\n    pass\n"),
                    (tree / "docs/testing.md", "x\n"), (stats, "{}")):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    # stats whose code is not known (a copy of a tool before the digest): collected anew
    assert tool.stale_stats() is True and not stats.exists()
    assert tool.stale_stats() is False  # no stats: mutmut collects them anyway
    stats.write_text("{}")
    tool.STATS_DIGEST.write_text(tool.source_digest())
    assert tool.stale_stats() is False and stats.exists()
    (tree / "docs/testing.md").write_text("a doc is no code\n")
    assert tool.stale_stats() is False and stats.exists()
    for p in (test, code, tree / "tests/unit/test_new.py"):
        p.write_text("def test_g():\n    pass\n")
        assert tool.stale_stats() is True and not stats.exists(), p
        stats.write_text("{}")
        tool.STATS_DIGEST.write_text(tool.source_digest())


def test_a_commits_executable_files_are_executable_in_the_copy(tmp_path, monkeypatch):
    """--rev copies a commit's files from `git archive`: its scripts keep their mode (a test
    runs scripts/setup.sh, another checks it is executable), its other files have none, and
    a file whose mode changed is set again though its content did not change. A repository
    of its own: the tool's copy of the checkout, where the tests also run, has no .git."""
    tool = _tool()
    repo = tmp_path / "repo"
    monkeypatch.setattr(tool, "ROOT", repo)
    _copy_at(tool, monkeypatch, repo / ".cache/mutation/tree")
    names = ("scripts/setup.sh", "tasks/preflight.py", "README.md", "group_data/all.py")
    for n in names:
        (repo / n).parent.mkdir(parents=True, exist_ok=True)
        (repo / n).write_text(f"# {n}\n")
    (repo / "scripts/setup.sh").chmod(0o755)
    (repo / "pyproject.toml").write_text(PYPROJECT)
    _git(repo, "init", "-q")
    _git(repo, "add", *names, "pyproject.toml")
    _git(repo, "commit", "-qm", "one")
    files = tool._files_of("HEAD")
    assert "scripts/setup.sh" in tool.EXECUTABLE
    assert not {"pyproject.toml", "tasks/preflight.py", "README.md"} & tool.EXECUTABLE
    (tmp_path / "venv").mkdir()
    (repo / ".venv").symlink_to(tmp_path / "venv")
    tool.sync({n: files[n] for n in names})  # a fresh cache: the copy made from nothing
    for where in (tool.TREE, tool.TREE / "mutants"):  # the tests that run .venv/bin tools
        assert (where / ".venv").resolve() == tmp_path / "venv"
    # the package runs from src/ and reads group_data/all.py where paths.KIT_ROOT points
    # (two folders above core/: src/): every test reading the kit's defaults failed without
    kit_root = (tool.TREE / "src/beekeeper/core/paths.py").parents[2]
    assert (kit_root / "group_data/all.py").read_text() == "# group_data/all.py\n"
    assert (tool.TREE / "mutants/src/group_data").resolve() == tool.TREE / "mutants/group_data"
    assert tool.stale_stats() is False  # no stats yet: mutmut collects them
    mode = {n: (tool.TREE / n).stat().st_mode & 0o777 for n in
            (*names, "src/beekeeper/tasks/preflight.py")}
    assert mode == {"scripts/setup.sh": 0o755, "tasks/preflight.py": 0o644, "README.md": 0o644,
                    "group_data/all.py": 0o644, "src/beekeeper/tasks/preflight.py": 0o644}
    (tool.TREE / "README.md").chmod(0o755)
    tool.sync({n: files[n] for n in names})
    assert (tool.TREE / "README.md").stat().st_mode & 0o777 == 0o644
    assert (tool.TREE / "src/beekeeper/tasks/preflight.py").read_bytes() == \
        b"# tasks/preflight.py\n"


def test_mutmut_waits_30_s_beyond_a_tests_own_time_before_it_reads_a_timeout():
    """mutmut's default allowance is 1 s over 15 times a test's time in its stats: on 2 busy
    cores a surviving mutant's tests ran past it and read as a timeout, which counts as
    killed."""
    import tomllib

    tool = _tool()
    conf = tomllib.loads(tool.tree_pyproject(PYPROJECT))["tool"]["mutmut"]
    assert conf["timeout_constant"] == tool.TIMEOUT_S >= 30
    assert conf["only_mutate"] == ["src/beekeeper/core/planner.py",
                                   "src/beekeeper/verify/judge.py"]


def test_tests_are_mutmuts_only_selection_and_a_new_selection_collects_the_stats_anew(
        tmp_path, monkeypatch):
    """--tests: mutmut runs those tests only (its test selection), for its stats and every
    mutant; the stats of another selection do not hold (which test reaches which function
    is read from the tests run), and a score from a subset reads as a lower bound."""
    import tomllib

    tool = _tool()
    picked = ["tests/unit/test_schema.py", "tests/unit/test_config.py::test_x"]
    conf = tomllib.loads(tool.tree_pyproject(PYPROJECT, (), picked))["tool"]["mutmut"]
    assert conf["pytest_add_cli_args_test_selection"] == picked
    assert "pytest_add_cli_args_test_selection" not in \
        tomllib.loads(tool.tree_pyproject(PYPROJECT))["tool"]["mutmut"]
    # the project's own selection (the fast tier's folder and marker expression): the tests
    # named take the folder's place, the tier's markers stay
    tier = ["tests/unit", "-m", "not integration and not network and not gpu and not slow"]
    project = PYPROJECT + ('pytest_add_cli_args_test_selection = ["tests/unit", "-m",\n'
                           f'                                      "{tier[2]}"]\n')
    text = tool.tree_pyproject(project, (), picked)
    assert tomllib.loads(text)["tool"]["mutmut"]["pytest_add_cli_args_test_selection"] == \
        picked + tier[1:]
    tree = tmp_path / "tree"
    _copy_at(tool, monkeypatch, tree)
    (tree / "tests").mkdir(parents=True)
    (tree / "tests/test_a.py").write_text("def test_a():\n    pass\n")
    (tree / "pyproject.toml").write_text(tool.tree_pyproject(PYPROJECT))
    stats = tree / "mutants/mutmut-stats.json"
    stats.parent.mkdir()
    stats.write_text("{}")
    tool.STATS_DIGEST.write_text(tool.source_digest())
    assert tool.stale_stats() is False
    (tree / "pyproject.toml").write_text(tool.tree_pyproject(PYPROJECT, (), picked))
    assert tool.stale_stats() is True and not stats.exists()
    assert tool._score_of("91.5% at least (tests: tests/unit/test_schema.py)") == 91.5


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
                   cwd=cwd, check=True, capture_output=True)


def test_the_modules_a_change_touched_are_the_commits_with_rev(tmp_path, monkeypatch):
    """The slow tier mutates a commit (--rev HEAD) against its base: the modules that commit
    touched, not what the working tree holds beside it."""
    tool = _tool()
    tool.configured = lambda: ["beekeeper/facts/gpu.py", "beekeeper/facts/boot.py",
                               "beekeeper/core/planner.py"]
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    _git(tmp_path, "init", "-q")
    (tmp_path / "facts").mkdir()
    (tmp_path / "facts/gpu.py").write_text("a = 1\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "one")
    (tmp_path / "facts/gpu.py").write_text("a = 2\n")
    (tmp_path / "README.md").write_text("not configured\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "two")
    (tmp_path / "facts/boot.py").write_text("untracked\n")
    head = tool.resolve("HEAD")
    assert tool.changed_modules("HEAD~1", head) == ["beekeeper/facts/gpu.py"]
    assert tool.changed_modules("HEAD~1") == ["beekeeper/facts/boot.py",
                                              "beekeeper/facts/gpu.py"]
    assert tool.changed_modules("HEAD") == ["beekeeper/facts/boot.py"]


def test_the_mutants_of_named_functions_are_chosen_by_mutmuts_names():
    import fnmatch

    tool = _tool()
    globs = tool.function_globs("beekeeper/core/hostdata.py", ["_pin", "__init__"])
    names = {"beekeeper.core.hostdata.x__pin__mutmut_3": True,
             "beekeeper.core.hostdata.xǁBadǁ__init____mutmut_2": True,
             "beekeeper.core.hostdata.x__pin_text__mutmut_1": False,
             "beekeeper.core.hostdata.x_translate__mutmut_1": False}
    for name, chosen in names.items():
        assert any(fnmatch.fnmatch(name, g) for g in globs) is chosen, name
        assert tool.of_functions(name, ["_pin", "__init__"]) is chosen, name
        assert tool.of_functions(name, []) is True
    assert not any(fnmatch.fnmatch("beekeeper.core.planner.x__pin__mutmut_1", g) for g in globs)


TABLE = """before

<!-- mutation-scores:begin -->
| module | mutants | killed | survived | equivalent | left | score | commit | date | wall time |
|---|---|---|---|---|---|---|---|---|---|
| `facts/gpu.py` | 264 | 250 | 14 | 14 | 0 | 100% (68.9% before) | 5db3004 | | |
| `tasks/driver_preflight.py` | 684 | 677 | 7 | 7 | 0 | 100% (94.1% first) | 674156d | | |
<!-- mutation-scores:end -->

after
"""


def test_a_run_writes_its_rows_into_the_score_table_and_tells_a_drop():
    tool = _tool()
    rows = {"tasks/driver_preflight.py": tool.table_row(
        "tasks/driver_preflight.py", 700, 680, 8, 12, "98.3%", "abcdef1234", 1500.0),
        "facts/gpu.py": tool.table_row("facts/gpu.py", 264, 250, 14, 0, "100.0%", "1234567",
                                       60.0),
        "facts/host.py": tool.table_row("facts/host.py", 10, 9, 1, 0, "100.0%", "1234567",
                                        30.0)}
    text, said = tool.update_table(TABLE, rows)
    lines = text.splitlines()
    assert lines[:5] == TABLE.splitlines()[:5] and text.endswith("\n\nafter\n")
    assert lines[5] == rows["facts/gpu.py"]
    assert lines[6].startswith("| `tasks/driver_preflight.py` | 700 | 680 | 20 | 8 | 12 | "
                               "98.3% (100% before, at 674156d) | abcdef1 | ")
    assert lines[6].endswith(" | 25 min |")
    assert lines[7] == rows["facts/host.py"] and lines[8] == "<!-- mutation-scores:end -->"
    assert "tasks/driver_preflight.py: the score dropped from 100% to 98.3%: a survivor no " \
        "test kills, or a test lost" in said
    assert "facts/gpu.py: 100.0%, as before" in said
    assert "facts/host.py: a new row in the score table, 100.0%" in said
    assert tool.update_table("no table\n", rows) == (
        "no table\n", ["docs/testing.md has no score table (its mutation-scores markers)"])


def test_after_a_run_the_stats_hold_for_the_code_run_and_the_table_is_written(tmp_path,
                                                                             monkeypatch):
    """main() with mutmut's run stood in for: the stats' digest written for the code the run
    was on, mutmut given the named functions' mutants only, and the score table written after
    a whole module's run (not after a run of some functions)."""
    tool = _tool()
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    _copy_at(tool, monkeypatch, tmp_path / ".cache/mutation/tree")
    doc = tmp_path / "testing.md"
    planner = "| `beekeeper/core/planner.py` | 264 |"
    doc.write_text(TABLE.replace("| `facts/gpu.py` | 264 |", planner))
    monkeypatch.setattr(tool, "DOC", doc)
    monkeypatch.setattr(tool, "sync", lambda files, deselect, tests: 0)
    monkeypatch.setattr(tool, "_files_of", lambda rev: {})
    monkeypatch.setattr(tool, "equivalents", lambda: {})
    meta = tool.TREE / "mutants/src/beekeeper/core/planner.py.meta"
    meta.parent.mkdir(parents=True)
    (tool.TREE / "src").mkdir()
    (tool.TREE / "src/x.py").write_text("x = 1\n")
    runs = []

    def run(cmd, **kw):
        if cmd[:2] == ["git", "rev-parse"]:
            return subprocess.CompletedProcess(cmd, 0, "f" * 40 + "\n", "")
        runs.append(cmd)
        (tool.TREE / "mutants/mutmut-stats.json").write_text("{}")
        meta.write_text('{"exit_code_by_key": {"beekeeper.core.planner.x_f__mutmut_1": 1, '
                        '"beekeeper.core.planner.x_g__mutmut_1": 0}}')
        return subprocess.CompletedProcess(cmd, 0)

    class Popen:  # mutmut's run, as main() starts it (run_keeping_stats)
        def __init__(self, cmd, **kw):
            self.returncode = run(cmd, **kw).returncode

        def wait(self, timeout=None):
            return self.returncode

    monkeypatch.setattr(tool, "subprocess", SimpleNamespace(
        run=run, Popen=Popen, CompletedProcess=subprocess.CompletedProcess,
        TimeoutExpired=subprocess.TimeoutExpired))
    monkeypatch.setattr(sys, "argv", ["mutation.py", "--rev", "HEAD", "--function", "f",
                                      "beekeeper/core/planner.py"])
    assert tool.main() == 0  # x_f's one mutant killed
    assert runs[-1][-2:] == ["beekeeper.core.planner.x_f__mutmut_*",
                             "beekeeper.core.planner.xǁ*ǁf__mutmut_*"]
    assert tool.STATS_DIGEST.read_text() == tool.source_digest()
    assert doc.read_text() == TABLE.replace("| `facts/gpu.py` | 264 |", planner)
    monkeypatch.setattr(sys, "argv", ["mutation.py", "--rev", "HEAD", "beekeeper/core/planner.py"])
    assert tool.main() == 1  # x_g's survives
    assert runs[-1][-1] == "beekeeper.core.planner.*"
    row = next(x for x in doc.read_text().splitlines() if x.startswith(planner[:31]))
    assert row.startswith("| `beekeeper/core/planner.py` | 2 | 1 | 1 | 0 | 1 | 50.0% (100% "
                          "before, at 5db3004) | fffffff | ")


def test_the_stats_are_kept_as_soon_as_written_not_when_the_run_ends(tmp_path, monkeypatch):
    """A run stopped after mutmut wrote its stats (the tool itself stopped: Ctrl-C, a
    session's end) kept nothing, so the next run collected them again (minutes): the digest
    is written while mutmut still runs, once the stats file is new."""
    import os
    import signal
    import threading
    import time

    tool = _tool()
    tree = tmp_path / "tree"
    _copy_at(tool, monkeypatch, tree)
    (tree / "mutants").mkdir(parents=True)
    pid_file = tmp_path / "pid"
    # mutmut stood in for: writes its stats, then works on
    child = (f"import os, pathlib, time; pathlib.Path({str(pid_file)!r})"
             ".write_text(str(os.getpid())); "
             "pathlib.Path('mutants/mutmut-stats.json').write_text('{}'); time.sleep(60)")
    done: list[int] = []
    t = threading.Thread(target=lambda: done.append(tool.run_keeping_stats(
        [sys.executable, "-c", child], dict(os.environ), "the-digest", poll_s=0.1)))
    t.start()
    deadline = time.monotonic() + 20
    while not tool.STATS_DIGEST.is_file() and time.monotonic() < deadline:
        time.sleep(0.1)
    try:
        assert tool.STATS_DIGEST.is_file() and not done  # kept while the run goes on
        assert tool.STATS_DIGEST.read_text() == "the-digest"
    finally:
        os.kill(int(pid_file.read_text()), signal.SIGTERM)
        t.join(30)
    assert done and done[0] != 0
