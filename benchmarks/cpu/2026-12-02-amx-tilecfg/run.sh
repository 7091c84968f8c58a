#!/usr/bin/env bash
# Prints the compiler, how _tile_loadconfig is defined in its headers, and the instructions it
# emits for tilecfg.c at -O2: the stores before ldtilecfg show which bytes of the 64-byte
# configuration reach memory.
set -euo pipefail
cd "$(dirname "$0")"
cc=${CC:-gcc}
"$cc" --version | head -1
hdr=$("$cc" -print-file-name=include)/amxtileintrin.h
[ -f "$hdr" ] && grep -A3 '^_tile_loadconfig' "$hdr" | sed -n 3p
out=$(mktemp -d)
"$cc" -O2 -mamx-tile -c tilecfg.c -o "$out/tilecfg.o"
objdump -d --no-show-raw-insn "$out/tilecfg.o" | sed -n '/<config_tiles>:/,$p' | sed 1d
rm -rf "$out"
