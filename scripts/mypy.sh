#!/usr/bin/env bash
# mypy on the kit as installed: beekeeper.facts, .operations, .tasks, .templates and .verify
# live in the checkout's top-level folders (pyproject.toml's package-dir), which mypy cannot
# map, so it reads a folder of links laid out like site-packages (.cache/mypy-view).
set -euo pipefail
cd "$(dirname "$0")/.."
view=.cache/mypy-view
rm -rf "$view" && mkdir -p "$view/beekeeper"
for entry in beekeeper/*; do ln -s "../../../$entry" "$view/beekeeper/$(basename "$entry")"; done
for pkg in facts operations tasks verify; do ln -s "../../../$pkg" "$view/beekeeper/$pkg"; done
ln -s ../../deploy.py "$view/deploy.py"
cd "$view" && ../../.venv/bin/mypy --config-file ../../pyproject.toml beekeeper deploy.py
