"""
Model paths as users have them (host data `model_host_path`): a Hugging Face cache snapshot
path is a symlink into the cache's blobs, and is served when its target is a regular file
the server's user can reach (readability judged on the target's folders as well as the
link's); a native systemd service cannot open a file under /home, /root or /run/user (its
unit has ProtectHome=yes), so such a path is refused before any change; a file name the
kit cannot carry says which characters it can. In container mode, which mounts model_dir
alone, a symlink is served only where the container can follow it to its file (relative,
to a file in model_dir). Preflight runs on canned facts.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from beekeeper.core.errors import ConfigError, PreflightError
from beekeeper.tasks.preflight import LinkTexts, ModelTarget, in_container

from .harness import DEFAULTS, POD_DATA, SHA, SYSTEMD, facts, pod, run_deploy

SNAP = ("/root/.cache/huggingface/hub/models--unsloth--Qwen3.5-9B-GGUF/snapshots/"
        "3f1c0e6a/Qwen3.5-9B-Q8_0.gguf")
BLOB = "/root/.cache/huggingface/hub/models--unsloth--Qwen3.5-9B-GGUF/blobs/9f3c" + "0" * 60
LINKED = "/workspace/hf/snapshots/3f1c0e6a/Qwen3.5-9B-Q8_0.gguf"
LINKED_BLOB = "/workspace/hf/blobs/9f3c" + "0" * 60


def linked_host(link: str, target: str, **over):
    """A host where `link` is a symlink to the regular file `target` (pyinfra's File fact is
    False for a link, a dict for the file)."""
    files = {link: False, target: {"size": 1}}
    return pod(**{"ModelTarget": lambda path=None, **_: target if path == link else path,
                  "File": lambda path=None, **_: files.get(path),
                  "Sha256File": lambda path=None, **_: SHA if path in (link, target) else None,
                  "FileHead": b"GGUF\x03\x00\x00\x00", **over})


def test_a_symlink_to_a_readable_gguf_is_served():
    run_deploy({**POD_DATA, "model_host_path": LINKED}, linked_host(LINKED, LINKED_BLOB))


def test_readability_is_judged_on_the_targets_folders_too():
    blocked = {LINKED_BLOB: "folder /workspace/hf/blobs is mode 700, others cannot pass "
                            "through it"}
    with pytest.raises(PreflightError) as e:
        run_deploy({**POD_DATA, "model_host_path": LINKED}, linked_host(
            LINKED, LINKED_BLOB,
            OthersCannotRead=lambda path=None, **_: blocked.get(path, "")))
    assert str(e.value).endswith(
        f"host data `model_host_path`: the server runs as user beekeeper and cannot read "
        f"{LINKED} (a symlink to {LINKED_BLOB}) (folder /workspace/hf/blobs is mode 700, "
        "others cannot pass through it); fix: chmod o+r on the file and o+x on each folder "
        "above it, or move it into model_dir")


def test_a_dangling_symlink_is_not_a_file():
    with pytest.raises(PreflightError, match="is not a file on the host"):
        run_deploy({**POD_DATA, "model_host_path": LINKED},
                   linked_host(LINKED, LINKED_BLOB, ModelTarget=""))


def test_the_model_target_fact_follows_links(tmp_path):
    blob = tmp_path / "blobs" / "9f3c"
    blob.parent.mkdir()
    blob.write_bytes(b"GGUF\x03\x00\x00\x00")
    snap = tmp_path / "snap dir" / "m.gguf"
    snap.parent.mkdir()
    os.symlink("../blobs/9f3c", snap)

    def run(path):
        out = subprocess.run(["sh", "-c", ModelTarget().command(str(path))],
                             capture_output=True, text=True).stdout.splitlines()
        return ModelTarget().process(out)
    assert run(snap) == str(blob.resolve())
    assert run(blob) == str(blob.resolve())
    os.remove(blob)
    assert run(snap) == ""


# container mode: a Hugging Face cache snapshot served where it is (model_dir its folder)
SNAPDIR = "/srv/hf/models--me--ft/snapshots/3f1c0e6a"
SNAPLINK = f"{SNAPDIR}/my-ft-Q8_0.gguf"
HF_BLOB = "/srv/hf/models--me--ft/blobs/9f3c" + "0" * 60


def container_host(link: str, target: str, texts: tuple[str, ...]):
    """A container-mode host (its engine running) where `link` is a symlink, reading
    `texts` one link at a time (LinkTexts), to the regular file `target`."""
    files = {link: False, target: {"size": 1}}
    return facts(ModelTarget=lambda path=None, **_: target if path == link else path,
                 LinkTexts=lambda path=None, **_: texts if path == link else (),
                 File=lambda path=None, **_: files.get(path),
                 Sha256File=lambda path=None, **_: SHA if path in (link, target) else None)


def test_a_container_cannot_follow_a_snapshot_link_out_of_model_dir():
    """The container mounts model_dir alone: the snapshot's link to ../../blobs dangles there,
    so it is refused before any change (not at the smoke check after the build), naming the
    key and what would work."""
    data = {**DEFAULTS, "model_dir": SNAPDIR, "model_host_path": SNAPLINK, "model_sha256": SHA}
    with pytest.raises(PreflightError) as e:
        run_deploy(data, container_host(SNAPLINK, HF_BLOB, ("../../blobs/" + HF_BLOB[-64:],)))
    line = str(e.value)
    assert line.startswith(
        f"host canned: host data `model_host_path`: {SNAPLINK} (a symlink to {HF_BLOB}) cannot "
        f"be followed inside the server's container, which mounts model_dir {SNAPDIR} alone "
        f"(at /models): there the link leads to /blobs/{HF_BLOB[-64:]}; fix: copy the file "
        f"into the link's place (`cp --remove-destination {HF_BLOB} {SNAPLINK}`)"), line
    assert "mode = 'native'" in line
    # natively the server opens the host's path, and the link is followed there
    native = {**data, "mode": "native", "install_docker": False}
    run_deploy(native, container_host(SNAPLINK, HF_BLOB, ("../../blobs/" + HF_BLOB[-64:],)))


def test_a_container_follows_a_relative_link_to_a_file_in_model_dir_only():
    models = "/srv/beekeeper/models"
    link, real = f"{models}/mine-Q8_0.gguf", f"{models}/mine-Q8_0-v2.gguf"
    data = {**DEFAULTS, "model_host_path": link, "model_sha256": SHA}
    run_deploy(data, container_host(link, real, ("mine-Q8_0-v2.gguf",)))
    # the same file by its absolute host path: no such path inside the container
    with pytest.raises(PreflightError, match=r"there the link leads to /srv/beekeeper/models/"
                                             r"mine-Q8_0-v2\.gguf; fix: "):
        run_deploy(data, container_host(link, real, (real,)))
    # a relative link through a folder link out of model_dir: the host's target says so
    elsewhere = "/data/mine-Q8_0-v2.gguf"
    with pytest.raises(PreflightError, match=f"{elsewhere} lies outside it; fix: "):
        run_deploy(data, container_host(link, elsewhere, ("sub/mine-Q8_0-v2.gguf",)))


def test_a_missing_file_is_told_which_symlinks_each_mode_follows():
    models = "/srv/beekeeper/models"
    data = {**DEFAULTS, "model_host_path": f"{models}/gone.gguf", "model_sha256": SHA}
    with pytest.raises(PreflightError) as e:
        run_deploy(data, facts(ModelTarget=""))
    assert str(e.value).endswith(
        "fix: give the path of the .gguf there (or a relative symlink to a file in model_dir "
        "/srv/beekeeper/models, the one folder the server's container mounts), or model_path "
        "for a file on the controller")
    with pytest.raises(PreflightError, match=r"\(or a symlink to it\), or model_path"):
        run_deploy({**POD_DATA, "model_host_path": LINKED},
                   linked_host(LINKED, LINKED_BLOB, ModelTarget=""))


def test_the_link_texts_fact_reads_each_link_and_the_container_follows_them(tmp_path):
    """LinkTexts in sh on real links: each link's text in turn (relative ones from the
    link's folder), () for a file; in_container follows them as the container would."""
    models = tmp_path / "models"
    (models / "v2").mkdir(parents=True)
    (models / "v2" / "real.gguf").write_bytes(b"GGUF")
    os.symlink("v2/real.gguf", models / "hop.gguf")
    os.symlink("hop.gguf", models / "m.gguf")
    os.symlink(str(models / "v2" / "real.gguf"), models / "abs.gguf")
    os.symlink("../blobs/x", models / "out.gguf")

    def run(path):
        out = subprocess.run(["sh", "-c", LinkTexts().command(str(path))],
                             capture_output=True, text=True).stdout.splitlines()
        return LinkTexts().process(out)
    assert run(models / "m.gguf") == ("hop.gguf", "v2/real.gguf")
    assert in_container("m.gguf", run(models / "m.gguf")) == "/models/v2/real.gguf"
    assert run(models / "v2" / "real.gguf") == ()
    assert in_container("real.gguf", ()) == "/models/real.gguf"
    assert in_container("abs.gguf", run(models / "abs.gguf")) == f"{models}/v2/real.gguf"
    assert in_container("out.gguf", run(models / "out.gguf")) == "/blobs/x"  # dangling too


@pytest.mark.parametrize("path,target", [
    ("/home/ana/models/Qwen3.5-9B-Q8_0.gguf", None),
    ("/root/models/Qwen3.5-9B-Q8_0.gguf", None),
    (LINKED, SNAP),  # a link outside /home into the root's Hugging Face cache
])
def test_a_native_systemd_service_refuses_a_model_its_unit_hides(path, target):
    canned = linked_host(path, target, InitSystem=SYSTEMD) if target else pod(
        InitSystem=SYSTEMD, File=lambda path=None, **_: {"size": 1},
        Sha256File=SHA, FileHead=b"GGUF\x03\x00\x00\x00")
    data = {**POD_DATA, "model_host_path": path}
    data.pop("persistent_root", None)
    with pytest.raises(PreflightError) as e:
        run_deploy(data, canned)
    line = str(e.value)
    assert "host data `model_host_path`: " + path in line
    assert "ProtectHome=yes" in line and "fix: move or copy the file out of them" in line
    assert "/srv/beekeeper/models" in line  # model_dir, where it can go


def test_the_supervisor_runtime_serves_a_model_under_root():
    """No unit, no ProtectHome: a pod's supervised server reads /root when others may."""
    run_deploy({**POD_DATA, "model_host_path": SNAP}, linked_host(SNAP, BLOB))


@pytest.mark.parametrize("name,said", [
    ("my model-Q8_0.gguf", "' ' (a space)"),
    ("modèle-Q8_0.gguf", "'è'"),
    ("-model.gguf", "starts with '-'"),
])
def test_a_file_name_the_kit_cannot_carry_says_what_it_can(name, said):
    from beekeeper.core.config import load_host_config
    with pytest.raises(ConfigError) as e:
        load_host_config({**POD_DATA, "model_host_path": f"/workspace/models/{name}"})
    line = str(e.value)
    assert said in line, line
    assert "letters, digits and . _ + -" in line
    assert "is not a .gguf file name" not in line


@pytest.mark.parametrize("key,data", [
    ("model_file", {"model_repo": "o/r", "model_file": "My Model Q8_0.gguf"}),
    ("model_path", {"model_path": "/srv/gguf/My Model Q8_0.gguf"}),
    ("model_host_path", {"model_host_path": "/srv/gguf/My Model Q8_0.gguf",
                         "model_sha256": "b" * 64}),
])
def test_a_space_in_any_model_file_name_is_refused_saying_which_characters_are_allowed(key, data):
    """A space is refused, not carried (the name is one plain word in every runtime's command
    line, the shell lines that check and place it, the verify's engine commands and the Hub
    download): the line names the space and the characters a name may hold."""
    from beekeeper.core.config import load_host_config
    with pytest.raises(ConfigError) as e:
        load_host_config({"profile": "cpu-tiny", "source": {"path": "/s.tgz", "ref": "x"},
                          **data})
    line = str(e.value)
    assert line.startswith(f"host data `{key}`: "), line
    assert "' ' (a space)" in line and "letters, digits and . _ + -" in line, line
    assert "is not a .gguf file name" not in line


@pytest.mark.parametrize("name,said", [
    ("my model-Q8_0.gguf", "' ' (a space)"), ("modèle-Q8_0.gguf", "'è'"),
    ("-model.gguf", "starts with '-'"), ("model.bin", "does not end .gguf"),
    ("sub/model.gguf", "'/'"),
])
@pytest.mark.parametrize("role", ["model", "draft"])
def test_a_hub_file_name_the_kit_cannot_carry_says_what_it_can(role, name, said):
    from beekeeper.core.config import load_host_config
    with pytest.raises(ConfigError) as e:
        load_host_config({"profile": "q8-dflash-32k",
                          "source": {"git": "https://x/y", "ref": "a" * 40},
                          f"{role}_repo": "o/r", f"{role}_file": name})
    line = str(e.value)
    assert line.startswith(f"host data `{role}_file`: "), line
    assert said in line and "letters, digits and . _ + -" in line, line
    assert "model_path" in line  # what to do with a Hub file so named: a renamed copy
