"""
The GPU machine runs these scripts from a copy of the checkout, with nothing installed:
make the checkout importable the way pyproject.toml installs it (the top-level facts/,
operations/, tasks/, verify/ and templates/ as beekeeper.<name>), without pip.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAPPED = ("facts", "operations", "tasks", "verify", "templates")  # pyproject's package-dir


def use_checkout() -> Path:
    """Import the kit from this checkout; where it is installed, change nothing."""
    for folder in (ROOT, ROOT / "tests" / "gpu"):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    import beekeeper

    for name in MAPPED:
        full = f"beekeeper.{name}"
        try:
            importlib.import_module(full)
            continue
        except ImportError:
            pass
        spec = importlib.util.spec_from_file_location(
            full, ROOT / name / "__init__.py", submodule_search_locations=[str(ROOT / name)])
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        spec.loader.exec_module(module)
        setattr(beekeeper, name, module)
    return ROOT
