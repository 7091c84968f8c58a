#!/usr/bin/env python3
"""
Issue 42's figures ("every rule written once"), counted the same way before and after:

- runtime/mode branches: `if`/`elif` statements, conditional expressions and comprehension
  filters outside beekeeper/core/runtime.py (where the four ways of running a server are
  written) whose test reads the way the server runs: a name or attribute `mode`, `runtime`
  or `rt` (a file's `info.mode` is not), one of the Runtime's questions (`native`,
  `compose`, `supervised`, ...) asked of one, or its answer held in a local name;
- branches on another of the Runtime's questions (`rt.needs_docker`,
  `cfg.requested_way.builds_on_host`: any method or property of core/runtime.py's Runtime
  asked of a runtime), not counted above: the rule is written once on the Runtime, the
  branch is what the caller does with its answer;
- string-key reads of the deployment record: `x["key"]` or `x.get("key")` with a key of
  deployed.json in a module that reads the record (one that names `deployed.json`, a
  manifest or DeployedService);
- total source lines of the kit (beekeeper/, tasks/, operations/, facts/, verify/,
  deploy.py, uninstall.py; templates and tests not counted).

    .venv/bin/python scripts/rule_figures.py [-v]    # -v lists each place counted

Refusals built by hand are counted by tests/unit/test_refusal.py (0, or it fails).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("beekeeper", "tasks", "operations", "facts", "verify")
ENTRY = ("deploy.py", "uninstall.py")
RUNTIME_MODULE = Path("beekeeper/core/runtime.py")

# a name or attribute that is the way of running itself
WAY = {"mode", "runtime", "rt", "server_runtime", "requested_runtime"}
# the Runtime's questions, counted where asked of a runtime (`facts.runtime.native`, `rt.compose`)
QUESTIONS = {"native", "container", "compose", "supervised", "env_quoted", "recorded"}
# objects whose `mode` is a file's (stat), not the server's
NOT_A_WAY = {"info", "st"}
# functions about Docker's own runtimes (nvidia-container-runtime), not the server's
OTHER_RUNTIMES = {"without_runtime"}
sys.path.insert(0, str(ROOT))
from beekeeper.core.deployed import DeployedService  # noqa: E402 (standard library only)

RECORD_KEYS = set(DeployedService().to_dict())  # the keys of deployed.json


def runtime_members() -> set[str]:
    """The Runtime's methods and properties, read from core/runtime.py."""
    tree = ast.parse((ROOT / RUNTIME_MODULE).read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Runtime")
    return {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}


HOLDERS = WAY | {"way", "requested_way"}  # what holds a Runtime where it is asked


def _asks_the_runtime(test: ast.expr, members: set[str]) -> bool:
    for n in ast.walk(test):
        if isinstance(n, ast.Attribute) and n.attr in members:
            inner = n.value
            if (isinstance(inner, ast.Name) and inner.id in HOLDERS) or \
                    (isinstance(inner, ast.Attribute) and inner.attr in HOLDERS):
                return True
    return False


def sources() -> Iterator[Path]:
    for folder in FOLDERS:
        yield from sorted((ROOT / folder).rglob("*.py"))
    for name in ENTRY:
        yield ROOT / name


def _asks_the_way(test: ast.expr) -> bool:
    parents = {c: p for p in ast.walk(test) for c in ast.iter_child_nodes(p)}
    for n in ast.walk(test):
        up = parents.get(n)
        # a bare `native` or `supervised` is a question's answer held in a local name
        if isinstance(n, ast.Name) and n.id in WAY | QUESTIONS:
            # `runtime.will_change`: an operation named so, not the way asked
            if not (isinstance(up, ast.Attribute) and up.attr not in QUESTIONS | WAY):
                return True
        if isinstance(n, ast.Attribute):
            inner = n.value
            if n.attr in WAY and not (isinstance(inner, ast.Name) and inner.id in NOT_A_WAY):
                return True
            if n.attr in QUESTIONS and (
                    (isinstance(inner, ast.Name) and inner.id in WAY)
                    or (isinstance(inner, ast.Attribute) and inner.attr in WAY)):
                return True
    return False


def branches(tree: ast.AST, members: set[str] | None = None) -> list[int]:
    """The branches that read the way the server runs; with `members`, those that ask the
    Runtime another of its questions instead."""
    skipped = {n for fn in ast.walk(tree)
               if isinstance(fn, ast.FunctionDef) and fn.name in OTHER_RUNTIMES
               for n in ast.walk(fn)}
    tests = [(n, n.test) for n in ast.walk(tree) if isinstance(n, (ast.If, ast.IfExp))]
    # a comprehension's filter (`[s for s in services if s.mode == "native"]`) too
    tests += [(n, t) for n in ast.walk(tree) if isinstance(n, ast.comprehension)
              for t in n.ifs]
    if members is None:
        return [t.lineno for n, t in tests if n not in skipped and _asks_the_way(t)]
    return [t.lineno for n, t in tests if n not in skipped and not _asks_the_way(t)
            and _asks_the_runtime(t, members)]


def record_reads(tree: ast.AST, text: str) -> list[int]:
    if not any(w in text for w in ("deployed.json", "manifest", "DeployedService")):
        return []
    found = []
    for n in ast.walk(tree):
        key = None
        # a record is held by a name (`m["port"]`), not a call's answer (a server's props)
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) \
                and not isinstance(n.value, ast.Call):
            key = n.slice.value
        elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
              and n.func.attr == "get" and n.args and isinstance(n.args[0], ast.Constant)):
            key = n.args[0].value
        if key in RECORD_KEYS:
            found.append(n.lineno)
    return found


def main(argv: list[str]) -> int:
    verbose = "-v" in argv
    other = "branches on another Runtime question"
    figures: dict[str, list[str]] = {"runtime/mode branches": [], other: [],
                                     "string-key reads of the deployment record": []}
    members = runtime_members()
    lines = 0
    for path in sources():
        text = path.read_text()
        lines += len(text.splitlines())
        rel = path.relative_to(ROOT)
        tree = ast.parse(text)
        if rel != RUNTIME_MODULE:
            figures["runtime/mode branches"] += [f"{rel}:{n}" for n in branches(tree)]
            figures[other] += [f"{rel}:{n}" for n in branches(tree, members)]
        figures["string-key reads of the deployment record"] += [
            f"{rel}:{n}" for n in record_reads(tree, text)]
    for name, where in figures.items():
        print(f"{name}: {len(where)}")
        if verbose:
            print("".join(f"  {w}\n" for w in sorted(where)), end="")
    print(f"source lines: {lines}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
