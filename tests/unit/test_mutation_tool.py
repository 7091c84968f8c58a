"""scripts/mutation.py's own rules (docs/testing.md, "Mutation testing"): the copy's pytest
gets the same node ids at every collection in one process, and mutmut's mutants/ follows the
copy."""

import ast
import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

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
