"""Mutation testing of the modules that decide things (mutmut; docs/testing.md, "Mutation
testing").

    .venv/bin/python scripts/mutation.py                  # configured modules this change touched
    .venv/bin/python scripts/mutation.py facts/gpu.py     # named modules (checkout paths)
    .venv/bin/python scripts/mutation.py --all            # every configured module
    .venv/bin/python scripts/mutation.py --rev HEAD ...   # a commit, not the working tree
    .venv/bin/python scripts/mutation.py --report         # the last results, nothing run
    .venv/bin/python scripts/mutation.py --function translate core/hostdata.py  # some functions

After a run of whole modules each one's row of docs/testing.md's score table is written
there (update_table: its figures, the commit, the day, the wall time, the score before where
it changed), and a drop is told (`--no-table` leaves the table as it is); a survivor neither
killed nor listed as equivalent makes the exit status 1.

"This change" is what `git diff --name-only BASE` (default HEAD: the uncommitted change) and
the untracked files name; with --rev, what `git diff --name-only BASE REV` names (the commit's
change, whatever the working tree holds beside it). The modules are [tool.mutmut] only_mutate
in pyproject.toml, spelled as installed (beekeeper/facts/gpu.py is the checkout's
facts/gpu.py). mutmut imports the mutated copy by its installed name, so it runs in a copy of
the tree laid out as site-packages (.cache/mutation/tree/: the checkout's files as they are,
for the tests that read them by path, and src/beekeeper/ with facts, operations, tasks, verify
and templates inside it, which mutmut mutates and puts first on sys.path). One copy for every
module: mutmut's stats (which test calls which function, the fast tier run once under its
tracer) are collected once and kept; a run then tests the named modules' mutants only (`mutmut
run 'beekeeper.facts.gpu.*'`), each against the tests that call its function. Only files that
changed are copied again, and new tests get their stats added. Of the working tree only
docs/testing.md's score table is written, after a run.

Two things mutmut does not do for a copy that is kept: it runs its pytest sessions (stats,
the list of tests, the clean run) one after another in one process, and pytest caches the ids
it makes for stacked parametrize marks on the marks themselves, escaped; a second collection
in that process escapes them again, so a test whose explicit id holds a backslash (`'/srv/m\\x85'`)
gets another node id, and the clean run of a module those tests call stops with pytest's
exit 4 ("not found": mutmut's BadTestExecutionCommandsException). The copy's pytest loads a
small plugin (PLUGIN, written beside the tree) that drops that cache before each collection.
And mutmut copies the package and the tests into mutants/ once, never removing a file nor
replacing a package file that is there: sync() makes mutants/ follow the copy (the mutated
modules, which mutmut remakes when their source is newer, and mutmut's own files aside).
And mutmut adds the stats of new tests only: a test it knew that now calls a function it did
not call then (a function added, or a caller changed) is never run against that function's
mutants, which then survive falsely. The stats are collected anew whenever the package or
the tests (src/ and tests/ of the copy) differ from those they were collected on
(STATS_DIGEST).

Runs under `nice` with one worker by default (`-j N` for more): the machine is shared. The
score of a module is killed / (mutants - equivalent ones), the equivalent ones being those
docs/testing.md lists between its mutation-equivalents markers, each with why.
"""

from __future__ import annotations

import argparse
import filecmp
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".cache" / "mutation"
# the checkout's folders installed inside the package (pyproject.toml's package-dir)
INSIDE = ("facts", "operations", "tasks", "verify", "templates")
DOC = ROOT / "docs" / "testing.md"
KILLED, SURVIVED, NO_TESTS, TIMEOUT = "killed", "survived", "no tests", "timeout"


def installed_name(path: str) -> str:
    """facts/gpu.py -> beekeeper/facts/gpu.py; beekeeper/core/x.py stays."""
    top = path.split("/", 1)[0]
    return f"beekeeper/{path}" if top in INSIDE else path


def checkout_name(path: str) -> str:
    parts = path.split("/")
    return "/".join(parts[1:]) if len(parts) > 2 and parts[1] in INSIDE else path


def configured() -> list[str]:
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    return list(conf["only_mutate"])


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout


def changed_modules(base: str, rev: str | None = None) -> list[str]:
    """The configured modules the change touched: the working tree's against `base` (the
    untracked files too), or with `rev` the commit's (`git diff base rev`: what the run
    mutates, whatever the working tree holds beside it)."""
    names = git("diff", "--name-only", base, rev).split() if rev else \
        git("diff", "--name-only", base).split() + \
        git("ls-files", "-o", "--exclude-standard").split()
    wanted = set(configured())
    return sorted({installed_name(n) for n in names} & wanted)


def _files_of(rev: str | None) -> dict[str, bytes | Path]:
    """Relative path -> the file (working tree) or its bytes (a commit)."""
    if rev is None:
        names = git("ls-files", "-co", "--exclude-standard", "-z").split("\0")
        return {n: ROOT / n for n in names if n and (ROOT / n).is_file()}
    # one archive of the commit the name means now: HEAD moves while others commit, and a
    # file read at each name in turn could mix two commits
    tar = subprocess.run(["git", "archive", "--format=tar", resolve(rev)], cwd=ROOT, check=True,
                         capture_output=True).stdout
    out: dict[str, bytes | Path] = {}
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        for m in t.getmembers():
            if m.isfile():
                f = t.extractfile(m)
                out[m.name] = f.read() if f else b""
                if m.mode & 0o111:  # a script the tests run, or check is executable
                    EXECUTABLE.add(m.name)
            elif m.issym():  # as `git show` gives a link: its target
                out[m.name] = m.linkname.encode()
    return out


# the files of a commit (--rev) whose mode is executable: written so in the copy
EXECUTABLE: set[str] = set()


def resolve(rev: str) -> str:
    """The commit `rev` names (HEAD, a branch, a short hash), as a full hash."""
    return git("rev-parse", "--verify", f"{rev}^{{commit}}").strip()


def _put(src: bytes | Path, dest: Path) -> bool:
    """Copy when the content differs (a file that did not change keeps its mtime, and so
    mutmut's results for it). True when it was written."""
    if dest.is_file() and (filecmp.cmp(src, dest, shallow=False) if isinstance(src, Path)
                           else dest.read_bytes() == src):
        return False
    dest.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(src, Path):
        shutil.copy2(src, dest)
    else:
        dest.write_bytes(src)
    return True


TREE = WORK / "tree"
# pytest plugin of the copy (see the module's docstring), in a folder of its own on the
# copy's PYTHONPATH: mutmut takes the tree and its src/ off sys.path
PLUGIN_DIR = "mutation-pytest-plugin"
PLUGIN = "beekeeper_mutation_ids"
PLUGIN_TEXT = '''"""scripts/mutation.py's pytest plugin: each collection makes parametrize ids anew.

pytest keeps the ids it made for stacked parametrize marks on the mark (_param_ids_generated,
already escaped) and takes them as given ids at the next collection in the same process,
escaping them again: mutmut collects several times in one process, and an id holding a
backslash would change between its stats run and its clean run.
"""

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc):
    for mark in metafunc.definition.iter_markers(name="parametrize"):
        source = getattr(mark, "_param_ids_from", None)
        if source is not None and getattr(source, "_param_ids_generated", None) is not None:
            object.__setattr__(source, "_param_ids_generated", None)
'''
# mutmut's timeout_constant (seconds; see tree_pyproject)
TIMEOUT_S = 30.0
# mutmut's own files in mutants/, never a copy of the tree's
MUTMUT_FILES = ("mutmut-stats.json", "mutmut-cicd-stats.json")
# the digest of the code and tests mutmut's stats were collected on (source_digest)
STATS_DIGEST = WORK / "stats-source"


def source_digest() -> str:
    """The package and the tests as the copy holds them (src/ and tests/): mutmut's stats,
    which test calls which function, hold for that code only."""
    h = hashlib.sha256()
    conf = TREE / "pyproject.toml"  # which tests run (--tests, --deselect)
    if conf.is_file():
        h.update(b"pyproject.toml\0" + conf.read_bytes() + b"\0")
    for top in ("src", "tests"):
        for p in sorted((TREE / top).rglob("*.py")):
            if "__pycache__" not in p.parts:
                h.update(p.relative_to(TREE).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def stale_stats() -> bool:
    """Drop mutmut's stats when the code or the tests changed since they were collected
    (see the module's docstring): mutmut then collects them anew, the whole tier once under
    its tracer. True when they were dropped."""
    stats = TREE / "mutants" / "mutmut-stats.json"
    if not stats.is_file():
        return False
    if STATS_DIGEST.is_file() and STATS_DIGEST.read_text() == source_digest():
        return False
    stats.unlink()
    return True


def run_keeping_stats(cmd: list[str], env: dict[str, str], digest: str,
                      poll_s: float = 2.0) -> int:
    """Run mutmut in the copy; as soon as its stats are written (mutants/mutmut-stats.json,
    collected first), say for which code and tests they hold (STATS_DIGEST), so that a run
    stopped after them (Ctrl-C, the session's end) does not make the next one collect them
    again (the fast tier once under the tracer: minutes)."""
    stats = TREE / "mutants" / "mutmut-stats.json"
    before = stats.stat().st_mtime_ns if stats.is_file() else None
    p = subprocess.Popen(cmd, cwd=TREE, env=env)
    kept = False
    while True:
        try:
            returncode = p.wait(timeout=poll_s)
        except subprocess.TimeoutExpired:
            returncode = None
        if not kept and stats.is_file() and stats.stat().st_mtime_ns != before:
            STATS_DIGEST.write_text(digest)  # the stats now hold for this code and tests
            kept = True
        if returncode is not None:
            if not kept and stats.is_file():
                STATS_DIGEST.write_text(digest)
            return returncode


def glob_of(mod: str) -> str:
    """mutmut's names of a module's mutants: beekeeper.facts.gpu.x_parse_...__mutmut_3."""
    return mod[:-3].replace("/", ".") + ".*"


def function_globs(mod: str, functions: list[str]) -> list[str]:
    """mutmut's names of the mutants of these functions of a module (a function
    `x_NAME__mutmut_N`, a method `xǁCLASSǁNAME__mutmut_N`)."""
    base = glob_of(mod)[:-1]
    return [g for f in functions for g in (f"{base}x_{f}__mutmut_*", f"{base}xǁ*ǁ{f}__mutmut_*")]


def of_functions(name: str, functions: list[str]) -> bool:
    """Whether mutant `name` is of one of `functions` (none named: every mutant is)."""
    tail = name.rsplit(".", 1)[-1]
    return not functions or any(re.fullmatch(rf"(x_|xǁ[^ǁ]*ǁ){re.escape(f)}__mutmut_\d+", tail)
                                for f in functions)


def sync(files: dict[str, bytes | Path], deselect: tuple[str, ...] | list[str] = (),
         tests: tuple[str, ...] | list[str] = ()) -> int:
    """Lay out the copy (see the module's docstring); returns the files written."""
    tree = TREE
    want: dict[str, bytes | Path] = {}
    for name, src in files.items():
        want[name] = src
        if name.split("/", 1)[0] in INSIDE:
            want[f"src/beekeeper/{name}"] = src
        elif name.startswith("beekeeper/"):
            want[f"src/{name}"] = src
    # the working tree's config, with --rev too
    want["pyproject.toml"] = tree_pyproject((ROOT / "pyproject.toml").read_text(),
                                            deselect, tests).encode()
    want[f"{PLUGIN_DIR}/{PLUGIN}.py"] = PLUGIN_TEXT.encode()
    written = sum(_put(src, tree / name) for name, src in want.items())
    for name, src in want.items():
        if not isinstance(src, Path):  # a commit's file: its mode from the archive
            names = {name, name.removeprefix("src/"), name.removeprefix("src/beekeeper/")}
            mode = 0o755 if names & EXECUTABLE else 0o644
            if (tree / name).stat().st_mode & 0o777 != mode:
                (tree / name).chmod(mode)
    keep = {tree / n for n in want}
    for p in list(tree.rglob("*")):  # files gone from the checkout go from the copy
        if p.is_file() and p not in keep and p.relative_to(tree).parts[0] != "mutants" \
                and "__pycache__" not in p.parts:
            p.unlink()
    follow_in_mutants(tree, set(want))
    # a module added to only_mutate since the copy's mutants were made: mutmut takes its
    # unmutated copy there for up to date, so it goes, and mutmut makes its mutants
    # and mutmut's stats, collected before its trampolines were there, are collected again
    # (else every mutant of it reads "no tests")
    for mod in configured():
        if not (tree / "mutants" / "src" / (mod + ".meta")).is_file() and \
                (tree / "mutants" / "src" / mod).is_file():
            (tree / "mutants" / "src" / mod).unlink()
            (tree / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
    # the tests that run .venv/bin tools find the checkout's venv (not copied: a link);
    # the package, run from src/, finds group_data/all.py where paths.KIT_ROOT points (src/,
    # two folders above core/): a link to the copy's own (config.group_all reads it)
    for where in (tree, tree / "mutants"):
        (where / "src").mkdir(parents=True, exist_ok=True)
        for link, target in ((where / ".venv", ROOT / ".venv"),
                             (where / "src" / "group_data", Path("..") / "group_data")):
            if not link.is_symlink():
                link.symlink_to(target)
    return written


def tree_pyproject(text: str, deselect: tuple[str, ...] | list[str] = (),
                   tests: tuple[str, ...] | list[str] = ()) -> str:
    """The copy's pyproject.toml: only_mutate as laid out under src/, the ids plugin loaded,
    the tests left out of this run (one that fails beside other work, say why), and with
    `tests` the only tests mutmut runs (its test selection; --tests)."""
    mods = ", ".join(f'"src/{m}"' for m in configured())
    text = re.sub(r"(?ms)^only_mutate = \[.*?\]$", f"only_mutate = [{mods}]", text)
    extra = ["-p", PLUGIN] + [w for t in deselect for w in ("--deselect", t)]
    words = ", ".join(json.dumps(w) for w in extra)
    text = re.sub(r"(?m)^pytest_add_cli_args = \[", f"pytest_add_cli_args = [{words}, ", text)
    # mutmut's time limit is 15 times (the tests' time in its stats + this): the stats time
    # tests that run the product at import (test_hostdata_mutants) at a fraction of their
    # run, and on 2 busy cores a surviving mutant's tests then ran past its 1 s default and
    # read as a timeout, which counts as killed; a hang still ends, after 7 minutes
    if tests:  # in place of the tier's folder; its marker expression stays
        picked = ", ".join(json.dumps(t) for t in tests)
        text, n = re.subn(r'(?m)^pytest_add_cli_args_test_selection = \["tests/unit",',
                          f"pytest_add_cli_args_test_selection = [{picked},", text)
        if not n:
            text = re.sub(r"(?m)^\[tool\.mutmut\]\n", "[tool.mutmut]\n"
                          f"pytest_add_cli_args_test_selection = [{picked}]\n", text, count=1)
    return re.sub(r"(?m)^\[tool\.mutmut\]\n", f"[tool.mutmut]\ntimeout_constant = {TIMEOUT_S}\n",
                  text, count=1)


def follow_in_mutants(tree: Path, names: set[str]) -> None:
    """mutants/ as the copy is: a file mutmut copied there (the package under src/, the tests
    and the other also_copy paths) that differs from the copy's is copied again, and one the
    copy no longer has goes. The mutated modules (mutmut makes them again when their source
    is newer) and mutmut's own files stay as they are."""
    mutants = tree / "mutants"
    if not mutants.is_dir():
        return
    mutated = {f"src/{m}" for m in configured()}
    for p in list(mutants.rglob("*")):
        rel = p.relative_to(mutants).as_posix()
        if p.is_symlink() or not p.is_file() or "__pycache__" in p.parts \
                or rel in MUTMUT_FILES or rel.endswith(".meta") or rel in mutated:
            continue
        if rel not in names:
            p.unlink()
        elif not filecmp.cmp(tree / rel, p, shallow=False) or \
                (tree / rel).stat().st_mode != p.stat().st_mode:
            shutil.copy2(tree / rel, p)


def equivalents() -> dict[str, str]:
    """docs/testing.md's table of equivalent mutants: name -> why."""
    text = DOC.read_text()
    m = re.search(r"<!-- mutation-equivalents:begin -->(.*?)<!-- mutation-equivalents:end -->",
                  text, re.S)
    out = {}
    for line in (m.group(1) if m else "").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].startswith("`") and cells[0].endswith("`"):
            out[cells[0].strip("`")] = cells[1]
    return out


def status(code: int | None) -> str:
    if code is None:
        return "not checked"
    return {1: KILLED, 3: KILLED, 0: SURVIVED, 5: NO_TESTS, 33: NO_TESTS, 36: TIMEOUT,
            24: TIMEOUT, -24: TIMEOUT, 152: TIMEOUT, 255: TIMEOUT}.get(code, "suspicious")


def results(modules: list[str]) -> dict[str, dict[str, str]]:
    """module -> {mutant name: status}, from mutmut's files in the copy."""
    out: dict[str, dict[str, str]] = {}
    for mod in modules:
        meta = TREE / "mutants" / "src" / (mod + ".meta")
        codes = json.loads(meta.read_text())["exit_code_by_key"] if meta.is_file() else {}
        out[mod] = {k: status(v) for k, v in codes.items()}
    return out


def report(modules: list[str], commit: str | None = None, wall_s: float | None = None,
           functions: list[str] | None = None, table: bool = False,
           tests: tuple[str, ...] | list[str] = ()) -> int:
    """One line a module, then each survivor not listed as equivalent. Exit 1 when any is
    left: a survivor is killed by a test or listed, with why, in docs/testing.md. After a
    run, each module's row of docs/testing.md's score table (the commit, today, the run's
    wall time), written into the table with `table` (update_table). With `functions`, the
    mutants of those functions only, and no row: it is no figure for the module."""
    eq = equivalents()
    left, stale, rows = [], [], {}
    print(f"{'module':42} {'mutants':>7} {'killed':>6} {'equiv':>5} {'left':>4}  score")
    for mod, found in results(modules).items():
        found = {k: v for k, v in found.items() if of_functions(k, functions or [])}
        killed = sum(s in (KILLED, TIMEOUT) for s in found.values())
        equiv = sum(k in eq for k, s in found.items() if s not in (KILLED, TIMEOUT))
        stale += [k for k, s in found.items() if k in eq and s in (KILLED, TIMEOUT)]
        rest = [k for k, s in found.items() if s not in (KILLED, TIMEOUT) and k not in eq]
        left += [(k, found[k]) for k in rest]
        denom = len(found) - equiv
        score = f"{100 * killed / denom:.1f}%" if denom else "-"
        if tests and denom:  # a mutant these tests leave may die under the others
            score += f" at least (tests: {', '.join(tests)})"
        name = checkout_name(mod) + (f" ({', '.join(functions)})" if functions else "")
        print(f"{name:42} {len(found):7} {killed:6} {equiv:5} {len(rest):4}  {score}")
        rows[checkout_name(mod)] = table_row(checkout_name(mod), len(found), killed, equiv,
                                             len(rest), score, commit, wall_s)
    for name in sorted(stale):  # a test kills it: it was not equivalent, or the code changed
        print(f"  listed as equivalent in docs/testing.md, but killed: {name}")
    if left:
        print(f"each one's diff: cd {TREE.relative_to(ROOT)} && ../../../.venv/bin/mutmut show "
              "NAME")
    for name, s in sorted(left):
        print(f"  {s}: {name}")
    if wall_s is not None and not functions:
        print("docs/testing.md's score table, this run:")
        for row in rows.values():
            print(row)
        if table:
            text, said = update_table(DOC.read_text(), rows)
            DOC.write_text(text)
            for line in said:
                print(f"[mutation] {line}")
    return 1 if left else 0


SCORES = re.compile(r"(<!-- mutation-scores:begin -->\n)(.*?)(<!-- mutation-scores:end -->)",
                    re.S)


def _score_of(cell: str) -> float | None:
    """A score cell's own figure ("98.5% (...)" -> 98.5), None where it has none."""
    m = re.match(r"\s*(\d+(?:\.\d+)?)%", cell)
    return float(m.group(1)) if m else None


def update_table(text: str, rows: dict[str, str]) -> tuple[str, list[str]]:
    """docs/testing.md's text with each module's row of the score table replaced by this
    run's (`rows`: checkout path -> table_row), a module not in the table added at its end;
    the score before is kept in the new row's score cell where it differs, and each change
    is told, a drop as a drop. Returns the text and what changed."""
    m = SCORES.search(text)
    if not m:
        return text, ["docs/testing.md has no score table (its mutation-scores markers)"]
    lines = m.group(2).splitlines()
    said = []
    for module, row in rows.items():
        cells = row.split(" | ")
        at = next((i for i, x in enumerate(lines)
                   if x.startswith(f"| `{module}` ") or x.startswith(f"| `{module}`|")), None)
        if at is None:
            lines.append(row)
            said.append(f"{module}: a new row in the score table, {cells[6]}")
            continue
        old = lines[at].split(" | ")
        before, now = _score_of(old[6]) if len(old) > 8 else None, _score_of(cells[6])
        if before is not None and now is not None and before != now:
            commit = old[7].split()[0] if old[7].strip() else "the last run"
            cells[6] = f"{cells[6]} ({before:g}% before, at {commit})"
            kind = "dropped" if now < before else "rose"
            said.append(f"{module}: the score {kind} from {before:g}% to {now:g}%"
                        + (": a survivor no test kills, or a test lost" if now < before else ""))
        else:
            said.append(f"{module}: {cells[6]}, as before" if before == now else
                        f"{module}: {cells[6]}")
        lines[at] = " | ".join(cells)
    body = "\n".join(lines) + "\n"
    return text[:m.start(2)] + body + text[m.end(2):], said


def table_row(module: str, mutants: int, killed: int, equiv: int, left: int, score: str,
              commit: str | None, wall_s: float | None) -> str:
    """A row of docs/testing.md's score table: module, mutants, killed, survived, equivalent,
    left, score, commit, date (UTC), wall time of the run (every module it ran, stats
    included)."""
    wall = "" if wall_s is None else f"{wall_s / 60:.0f} min" if wall_s >= 90 else \
        f"{wall_s:.0f} s"
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    return (f"| `{module}` | {mutants} | {killed} | {mutants - killed} | {equiv} | {left} | "
            f"{score} | {commit[:7] if commit else 'working tree'} | {day} | {wall} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("modules", nargs="*", help="checkout paths (facts/gpu.py)")
    ap.add_argument("--all", action="store_true", help="every configured module")
    ap.add_argument("--base", default="HEAD", help="what the change is against (git diff)")
    ap.add_argument("--rev", help="mutate this commit, not the working tree")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="mutmut's workers (default 1)")
    ap.add_argument("--report", action="store_true", help="print the last results only")
    ap.add_argument("--fresh", action="store_true", help="start the copy and mutmut's cache anew")
    ap.add_argument("--copy", default="tree", metavar="NAME",
                    help="the copy to run in (.cache/mutation/NAME, default tree): a second "
                         "one runs another module beside a run (each has its own stats)")
    ap.add_argument("--function", action="append", default=[], metavar="NAME",
                    help="run the mutants of this function (or method) of the module only: "
                         "no figure for the module, the score table is left as it is")
    ap.add_argument("--no-table", action="store_true",
                    help="leave docs/testing.md's score table as it is after the run")
    ap.add_argument("--tests", action="append", default=[], metavar="PATH",
                    help="run only these tests (test files or node ids, mutmut's test "
                         "selection): a module whose every mutant the whole tier reaches runs "
                         "hours on 2 cores; a mutant these leave alive may die under the "
                         "others, so the score is a lower bound, and its row says so")
    ap.add_argument("--deselect", action="append", default=[], metavar="TEST",
                    help="leave this test out (pytest's node id; a test that fails without a "
                         "mutant, e.g. beside other work): its kills are not counted")
    a = ap.parse_args()
    global TREE, STATS_DIGEST
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", a.copy):
        print(f"--copy {a.copy!r}: a folder name of letters, digits, _ and -")
        return 2
    if a.copy != "tree":
        TREE, STATS_DIGEST = WORK / a.copy, WORK / f"{a.copy}.stats-source"
    rev = resolve(a.rev) if a.rev else None
    mods = configured() if a.all else [installed_name(m) for m in a.modules] \
        if a.modules else changed_modules(a.base, rev)
    unknown = sorted(set(mods) - set(configured()))
    if unknown:
        print(f"not configured for mutation ([tool.mutmut] only_mutate): {unknown}")
        return 2
    if not mods:
        print("no configured module changed (name one, or --all)")
        return 0
    if a.function and len(mods) != 1:
        print("--function: name the one module it is of")
        return 2
    if a.report:
        return report(mods, functions=a.function, tests=a.tests)
    if a.fresh:
        shutil.rmtree(TREE, ignore_errors=True)
    written = sync(_files_of(rev), a.deselect, a.tests)
    print(f"[mutation] {written} files copied to {TREE.relative_to(ROOT)} "
          f"({'commit ' + rev[:7] if rev else 'the working tree'}); "
          f"mutating {', '.join(checkout_name(m) for m in mods)}", flush=True)
    if stale_stats():
        print("[mutation] the code or the tests changed since mutmut's stats were collected: "
              "collecting them anew (the fast tier once under mutmut's tracer)", flush=True)
    digest = source_digest()
    cmd = ["nice", "-n", "10", sys.executable, "-m", "mutmut", "run",
           "--max-children", str(a.jobs),
           *(function_globs(mods[0], a.function) if a.function else map(glob_of, mods))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(TREE / PLUGIN_DIR)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH")
                                    else []))}
    start = time.monotonic()
    returncode = run_keeping_stats(cmd, env, digest)
    wall_s = time.monotonic() - start
    if returncode != 0:
        print(f"[mutation] mutmut exited {returncode} after {wall_s:.0f} s")
        return returncode
    return report(mods, rev, wall_s, a.function, table=not a.no_table, tests=a.tests)


if __name__ == "__main__":
    sys.exit(main())
