"""
Native mode: build llama-server (and llama-bench beside it) on the host with its CUDA
toolkit (or CPU), install both in a versioned folder with a `current` link, and run the
server under a hardened systemd unit.
"""

from __future__ import annotations

import shlex

from .build import TARGETS, BuildSpec

# The CUDA toolkit's runtime libraries a CUDA build loads (cudart, cuBLAS and what they
# pull in), by file name; never the driver's own (libcuda, libnvidia-*), which the host or
# the container runtime provides.
TOOLKIT_LIBS = ("libcudart", "libcublas", "libcublasLt", "libnvrtc", "libnvJitLink")
# In the versioned folder of a build that keeps its toolkit libraries (a pod's): the copies,
# found through the binaries' run path ($ORIGIN/lib), and the list of where each came from.
KEPT_LIBS_DIR = "lib"
KEPT_LIBS_LIST = "toolkit-libs.txt"


def keeps_toolkit_libs(backend: str, persistent_root: str | None) -> bool:
    """A CUDA build on a pod keeps the toolkit libraries it loads beside its binaries: the
    pod's restart clears the container disk, a toolkit the kit installed there with it, and
    the volume's build must still start (and llama-bench still run) without it."""
    return backend == "cuda" and persistent_root is not None


def install_files(spec: BuildSpec, persistent_root: str | None) -> tuple[str, ...]:
    """What a complete install of the build holds in its versioned folder."""
    keep = (KEPT_LIBS_LIST,) if keeps_toolkit_libs(spec.backend, persistent_root) else ()
    return (*TARGETS, *keep)


def build_commands(spec: BuildSpec, src_dir: str, build_dir: str, jobs: int,
                   keep_libs: bool = False) -> list[list[str]]:
    # the copies first; an RPATH (not RUNPATH: --disable-new-dtags) also finds the libraries
    # the toolkit's own load (cuBLAS loads cublasLt), which a library without a run path of
    # its own would otherwise look for in the loader's cache only
    rpath = [f"-DCMAKE_BUILD_RPATH=$ORIGIN/{KEPT_LIBS_DIR}",
             "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags"] if keep_libs else []
    return [
        ["cmake", "-S", src_dir, "-B", build_dir, *spec.cmake_flags, *rpath],
        # one build, both targets (they share every object but their own main)
        ["cmake", "--build", build_dir, "-j", str(jobs), "--target", *TARGETS],
    ]


def install_dir(prefix: str, name: str) -> str:
    """Versioned install folder: one per build (BuildSpec.name: ref, CUDA, arch, flags)."""
    return f"{prefix}/{name}"


def keep_libs_commands(dest: str) -> list[str]:
    """Copy the toolkit libraries the installed binaries load (as `ldd` resolves them) into
    `dest`/lib, list where each came from, and fail unless every library resolves."""
    q = shlex.quote
    bins = " ".join(f"{q(dest)}/{t}" for t in TARGETS)
    names = "|".join(TOOLKIT_LIBS)
    lib, listed = f"{q(dest)}/{KEPT_LIBS_DIR}", f"{q(dest)}/{KEPT_LIBS_LIST}"
    return [
        f"rm -rf {lib} {listed} && install -d -m 0755 {lib}",  # never copies of copies
        f"ldd {bins} | awk '$2 == \"=>\" && $1 ~ /^({names})\\.so/ && $3 ~ /^\\// "
        f"{{print $3}}' | sort -u > {listed}.new",
        f"test -s {listed}.new",  # a CUDA build loads cudart at least
        f"xargs -r -a {listed}.new install -m 0644 -t {lib}",
        f"! ldd {bins} | grep 'not found'",
        f"mv {listed}.new {listed}",  # last: the list marks the install complete
    ]


def shell_script(spec: BuildSpec, src_dir: str, build_dir: str, jobs: int, dest: str,
                 prefix: str, cuda_bin: str = "/usr/local/cuda/bin",
                 persistent_root: str | None = None) -> str:
    """The host-side build: compile, install into `dest`, then move `current` atomically;
    a CUDA build finds nvcc in `cuda_bin` (the host's own toolkit, or the one the kit
    installed), and on a pod keeps the toolkit libraries it loads in `dest`."""
    q = shlex.quote
    keep = keeps_toolkit_libs(spec.backend, persistent_root)
    cmds = [" ".join(q(a) for a in c)
            for c in build_commands(spec, src_dir, build_dir, jobs, keep_libs=keep)]
    if spec.backend == "cuda":
        cmds.insert(0, f"export PATH={q(cuda_bin)}:$PATH")
    cmds += [
        f"install -d -m 0755 {q(dest)}",
        *(f"install -m 0755 {q(build_dir)}/bin/{t} {q(dest)}/{t}" for t in TARGETS),
        *(keep_libs_commands(dest) if keep else []),
        f"ln -sfn {q(dest)} {q(prefix)}/current.new && mv -T {q(prefix)}/current.new "
        f"{q(prefix)}/current",
    ]
    return " && ".join(cmds)
