"""
A pod's native CUDA build keeps the toolkit libraries it loads beside its binaries, so the
server still starts after the pod's restart cleared a toolkit the kit installed on the
container disk.

Real parts: the kit's own build script (core/native.shell_script: cmake configure with the
kit's flags, build, install, keep the libraries) run by bash, with the host's cmake, cc,
ldd and dynamic loader. The stand-in, named as one: the "toolkit" is a folder holding a
shared library named like CUDA's runtime (libcudart.so.13), built here, because this machine
has no CUDA; the source tree is a two-target CMake project named like the server's.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from beekeeper.core.config import load_host_config
from beekeeper.core.native import KEPT_LIBS_LIST, install_dir, install_files, shell_script

from .harness import CPU, DEFAULTS, requested_build

GPU = {**DEFAULTS, "profile": "q8-turbo4-64k", "mode": "native"}
ROOT = "/workspace/beekeeper"

CMAKE = """cmake_minimum_required(VERSION 3.14)
project(stand_in C)
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
foreach(t llama-server llama-bench)
  add_executable(${t} main.c)
  target_link_libraries(${t} PRIVATE "${TOOLKIT}/lib64/libcudart.so")
endforeach()
"""


@pytest.fixture
def built(tmp_path: Path):
    """Build the stand-in with the kit's script; returns a function (persistent_root) ->
    (install folder, toolkit folder, the script)."""
    for tool in ("cmake", "cc", "ldd"):
        assert shutil.which(tool), f"{tool} is needed (the README's test set-up has it)"

    def build(persistent_root: str | None) -> tuple[Path, Path, str]:
        base = tmp_path / ("pod" if persistent_root else "box")
        toolkit, src = base / "cuda-13.0", base / "src"
        (toolkit / "lib64").mkdir(parents=True)
        (toolkit / "bin").mkdir()
        # cudart loads a library of the toolkit's own (as cuBLAS loads cublasLt), with no
        # run path of its own: found through the binary's
        (toolkit / "lt.c").write_text("int lt_release(void) { return 13; }\n")
        subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcublasLt.so.13", "-o",
                        str(toolkit / "lib64/libcublasLt.so.13"), str(toolkit / "lt.c")],
                       check=True)
        (toolkit / "rt.c").write_text(
            "int lt_release(void);\nint cudart_release(void) { return lt_release(); }\n")
        subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcudart.so.13", "-o",
                        str(toolkit / "lib64/libcudart.so.13"), str(toolkit / "rt.c"),
                        "-L", str(toolkit / "lib64"), "-l:libcublasLt.so.13"], check=True)
        (toolkit / "lib64/libcudart.so").symlink_to("libcudart.so.13")
        src.mkdir()
        (src / "CMakeLists.txt").write_text(CMAKE)
        (src / "main.c").write_text(
            '#include <stdio.h>\nint cudart_release(void);\n'
            'int main(void) { printf("cudart %d\\n", cudart_release()); return 0; }\n')
        spec = requested_build(load_host_config(GPU), "9.0")
        dest = install_dir(str(base / "opt"), spec.name())
        script = shell_script(spec, str(src), str(base / "build"), 2, dest, str(base / "opt"),
                              cuda_bin=str(toolkit / "bin"), persistent_root=persistent_root)
        # the stand-in tree reads where its toolkit is from the environment's cmake cache
        script = script.replace("cmake -S", f"cmake -DTOOLKIT={toolkit} -S", 1)
        run = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        return Path(dest), toolkit, script

    return build


def test_a_pods_build_starts_after_its_toolkit_is_gone(built):
    dest, toolkit, script = built(ROOT)
    # a build cut short after the copies, before their list: built again over the copies
    (dest / KEPT_LIBS_LIST).unlink()
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (dest / "lib/libcudart.so.13").is_file()
    assert not (dest / "lib/libcudart.so.13").is_symlink()  # the file, not a link to the toolkit
    assert (dest / KEPT_LIBS_LIST).read_text().split() == [
        str(toolkit / "lib64/libcublasLt.so.13"), str(toolkit / "lib64/libcudart.so.13")]
    shutil.rmtree(toolkit)  # the pod's restart cleared the container disk
    for target in ("llama-server", "llama-bench"):
        run = subprocess.run([str(dest / target)], capture_output=True, text=True)
        assert (run.returncode, run.stdout) == (0, "cudart 13\n"), run.stderr


def test_a_build_off_a_pod_keeps_no_copies_and_needs_its_toolkit(built):
    dest, toolkit, _ = built(None)
    assert not (dest / "lib").exists() and not (dest / KEPT_LIBS_LIST).exists()
    shutil.rmtree(toolkit)
    run = subprocess.run([str(dest / "llama-server")], capture_output=True, text=True)
    # the loader's refusal: the library missing, or (where the machine has a real CUDA in
    # the loader's cache) a libcudart.so.13 that is not the one it was built with
    assert run.returncode == 127 and "cudart" in run.stderr, run.stderr


def test_a_pods_install_is_complete_only_with_its_kept_libraries():
    spec = requested_build(load_host_config(GPU), "9.0")
    assert install_files(spec, ROOT) == ("llama-server", "llama-bench", KEPT_LIBS_LIST)
    assert install_files(spec, None) == ("llama-server", "llama-bench")
    cpu = requested_build(load_host_config({**CPU, "mode": "native"}), None)
    assert install_files(cpu, ROOT) == ("llama-server", "llama-bench")


def test_a_build_whose_libraries_do_not_all_resolve_fails_and_is_not_complete(tmp_path):
    """The list of kept libraries marks the install complete (install_files), so it is
    written last: a build that links a library the loader cannot find fails, and the next
    deploy builds again instead of taking the folder as built."""
    tk, src = tmp_path / "cuda", tmp_path / "src"
    for d in (tk / "lib64", tk / "extra", tk / "bin", src):
        d.mkdir(parents=True)
    for lib, folder, c in (("libcudart.so.13", "lib64", "int cudart_release(void) { return 13; }"),
                           ("libextra.so.1", "extra", "int extra(void) { return 1; }")):
        (tk / f"{lib}.c").write_text(c + "\n")
        subprocess.run(["cc", "-shared", "-fPIC", f"-Wl,-soname,{lib}", "-o",
                        str(tk / folder / lib), str(tk / f"{lib}.c")], check=True)
    (tk / "lib64/libcudart.so").symlink_to("libcudart.so.13")
    (tk / "extra/libextra.so").symlink_to("libextra.so.1")
    (src / "CMakeLists.txt").write_text(CMAKE.replace(
        '"${TOOLKIT}/lib64/libcudart.so")', '"${TOOLKIT}/lib64/libcudart.so" -L${TOOLKIT}/extra '
        '-lextra)'))  # by -l: in no run path, so the loader does not find it
    (src / "main.c").write_text("int cudart_release(void); int extra(void);\n"
                                "int main(void) { return cudart_release() - 13 + extra() - 1; }\n")
    spec = requested_build(load_host_config(GPU), "9.0")
    opt = tmp_path / "opt"
    dest = Path(install_dir(str(opt), spec.name()))
    script = shell_script(spec, str(src), str(tmp_path / "build"), 2, str(dest), str(opt),
                          cuda_bin=str(tk / "bin"), persistent_root=ROOT)
    script = script.replace("cmake -S", f"cmake -DTOOLKIT={tk} -S", 1)
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert run.returncode != 0 and "libextra.so.1 => not found" in run.stdout, run.stdout[-1500:]
    assert not (opt / "current").exists()
    assert not all((dest / f).exists() for f in install_files(spec, ROOT))
