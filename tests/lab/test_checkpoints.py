"""Tests for mha.lab.checkpoints (round trip, clear errors) and for the shipped data/lab checkpoints' claims."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load as load_safetensors_bytes
from safetensors.torch import save as safetensors_save

import mha.lab.checkpoints
from mha.lab.checkpoints import (
    LAB_DIRECTORY,
    MANIFEST_NAME,
    CheckpointError,
    canonical_safetensors,
    checkpoint_names,
    load_checkpoint,
    load_json,
    read_manifest,
    record_file,
    save_checkpoint,
    sha256_of_file,
    verified_bytes,
)
from mha.lab.circuit_scores import head_role_scores
from mha.lab.tasks import InductionTask, task_from_dict
from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig

torch.set_num_threads(1)

COMMAND = "python -m scripts.train_checkpoints --only tiny"


def saved_model(directory, name="tiny", seed=3):
    config = TinyTransformerConfig(vocab_size=10, max_seq_len=6, d_model=8, n_layers=2, n_heads=2)
    model = TinyTransformer(config, seed=seed)
    path = save_checkpoint(model, name, seed=seed, steps=7, task={"name": "copy_back", "distance": 1},
                           regenerate=COMMAND, training={"steps": 7}, extra={"note": "test"}, directory=directory)
    return model, path


@pytest.mark.slow
def test_round_trip_gives_the_same_model_and_manifest_entry(tmp_path):
    model, path = saved_model(tmp_path)
    loaded, info = load_checkpoint("tiny", tmp_path)
    tokens = torch.tensor([[1, 2, 3, 4]])
    torch.testing.assert_close(loaded(tokens).logits, model(tokens).logits, rtol=0, atol=0)
    assert info.config == model.config and info.seed == 3 and info.steps == 7
    assert info.task == {"name": "copy_back", "distance": 1} and info.extra == {"note": "test"}
    assert info.sha256 == sha256_of_file(path) and info.regenerate == COMMAND
    assert checkpoint_names(tmp_path) == ["tiny"]


def test_saving_again_updates_one_entry_and_keeps_the_others(tmp_path):
    saved_model(tmp_path, "first")
    saved_model(tmp_path, "second", seed=4)
    manifest = read_manifest(tmp_path)
    assert sorted(manifest["checkpoints"]) == ["first", "second"]
    assert manifest["checkpoints"]["second"]["seed"] == 4


@pytest.mark.slow
def test_processes_saving_at_once_lose_no_manifest_entry(tmp_path):
    # the training scripts save from two worker processes; the manifest's read-modify-write is locked
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import time
        import mha.lab.checkpoints
        from test_checkpoints import saved_model
        read = mha.lab.checkpoints.read_manifest
        def read_slowly(directory):  # widen the window between reading the manifest and writing it back
            manifest = read(directory)
            time.sleep(0.005)
            return manifest
        mha.lab.checkpoints.read_manifest = read_slowly
        (Path(sys.argv[1]) / f"ready_{{sys.argv[2]}}").write_text("")
        while not (Path(sys.argv[1]) / "go").exists():  # both start together
            time.sleep(0.001)
        for index in range(25):
            saved_model(Path(sys.argv[1]), f"{{sys.argv[2]}}_{{index}}", seed=index)
    """)
    processes = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path), prefix]) for prefix in ("a", "b")]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"ready_{prefix}").exists() for prefix in ("a", "b")):  # both have imported torch
        assert time.monotonic() < deadline and all(process.poll() is None for process in processes), \
            "a saving process did not start"
        time.sleep(0.01)
    (tmp_path / "go").write_text("")
    assert [process.wait(timeout=120) for process in processes] == [0, 0]
    names = sorted(read_manifest(tmp_path)["checkpoints"])
    assert names == sorted(f"{prefix}_{index}" for prefix in ("a", "b") for index in range(25))


def test_missing_file_names_the_file_and_the_command(tmp_path):
    _, path = saved_model(tmp_path)
    path.unlink()
    with pytest.raises(CheckpointError) as raised:
        load_checkpoint("tiny", tmp_path)
    message = str(raised.value)
    assert "missing" in message and str(path) in message and COMMAND in message


def test_corrupted_file_names_the_file_and_the_command(tmp_path):
    _, path = saved_model(tmp_path)
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF  # flip one byte of the weights
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError) as raised:
        load_checkpoint("tiny", tmp_path)
    message = str(raised.value)
    assert "sha256" in message and str(path) in message and COMMAND in message


def test_unreadable_file_with_a_matching_hash_still_gives_the_clear_error(tmp_path):
    _, path = saved_model(tmp_path)
    path.write_bytes(b"this is not a safetensors file")
    manifest = json.loads((tmp_path / MANIFEST_NAME).read_text())
    manifest["checkpoints"]["tiny"]["sha256"] = sha256_of_file(path)
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError) as raised:
        load_checkpoint("tiny", tmp_path)
    assert "cannot be loaded" in str(raised.value) and COMMAND in str(raised.value)


def test_unknown_name_and_missing_manifest(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint manifest"):
        load_checkpoint("tiny", tmp_path)
    saved_model(tmp_path)
    with pytest.raises(CheckpointError, match="the checkpoints are: tiny"):
        load_checkpoint("other", tmp_path)


def test_result_files_are_recorded_and_checked(tmp_path):
    path = tmp_path / "curves.json"
    path.write_text(json.dumps({"loss": [3.0, 1.0]}))
    record_file(path, regenerate=COMMAND, description="a loss curve", directory=tmp_path)
    assert load_json("curves.json", tmp_path) == {"loss": [3.0, 1.0]}
    assert verified_bytes("curves.json", tmp_path) == path.read_bytes()  # the bytes that were checked
    path.write_text(json.dumps({"loss": [3.0, 2.0]}))
    with pytest.raises(CheckpointError, match="sha256") as raised:
        load_json("curves.json", tmp_path)
    assert COMMAND in str(raised.value)
    with pytest.raises(CheckpointError, match="sha256"):
        verified_bytes("curves.json", tmp_path)
    with pytest.raises(ValueError, match="regenerate"):
        save_checkpoint(TinyTransformer(TinyTransformerConfig(vocab_size=4, max_seq_len=4, d_model=4, n_heads=1)),
                        "x", seed=0, steps=0, task={}, regenerate="", directory=tmp_path)


def edit_manifest(directory, change):
    """Apply ``change`` to the parsed manifest of ``directory`` and write it back."""
    path = directory / MANIFEST_NAME
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


def replace_file(directory, path, data):
    """Overwrite a checkpoint file and record its new sha256, so only the checks after the hash can complain."""
    path.write_bytes(data)

    def rehash(manifest):
        manifest["checkpoints"]["tiny"]["sha256"] = hashlib.sha256(data).hexdigest()
    edit_manifest(directory, rehash)


# ---- (a) the file's own metadata must agree with the manifest ----

def test_a_manifest_config_that_differs_from_the_files_is_refused(tmp_path):
    """The 2-head file has the same tensor shapes as a 1-head model; only its metadata can tell them apart."""
    saved_model(tmp_path)

    def one_head(manifest):
        manifest["checkpoints"]["tiny"]["config"]["n_heads"] = 1
    edit_manifest(tmp_path, one_head)
    with pytest.raises(CheckpointError) as raised:
        load_checkpoint("tiny", tmp_path)
    message = str(raised.value)
    assert "n_heads = 2 in the file but 1 in the manifest" in message and COMMAND in message


def test_a_manifest_entry_that_points_to_another_checkpoints_file_is_refused(tmp_path):
    saved_model(tmp_path, "first")
    saved_model(tmp_path, "second")

    def swap(manifest):
        manifest["checkpoints"]["second"]["file"] = "first.safetensors"
        manifest["checkpoints"]["second"]["sha256"] = manifest["checkpoints"]["first"]["sha256"]
    edit_manifest(tmp_path, swap)
    with pytest.raises(
        CheckpointError, match="saved as checkpoint 'first', but the manifest .* lists it under 'second'"
    ):
        load_checkpoint("second", tmp_path)


def test_a_file_without_config_metadata_is_refused(tmp_path):
    model, path = saved_model(tmp_path)
    replace_file(tmp_path, path, safetensors_save(dict(model.state_dict()), metadata={"name": "tiny"}))
    with pytest.raises(CheckpointError, match="no readable model config in its safetensors metadata"):
        load_checkpoint("tiny", tmp_path)


def test_tensor_shapes_that_do_not_fit_the_config_are_named(tmp_path):
    model, path = saved_model(tmp_path)
    tensors = dict(model.state_dict())
    tensors["W_E"] = torch.zeros(3, 8)
    del tensors["W_U"]
    replace_file(tmp_path, path, canonical_safetensors(tensors, {"name": "tiny", "config": model.config.to_json()}))
    with pytest.raises(CheckpointError) as raised:
        load_checkpoint("tiny", tmp_path)
    message = str(raised.value)
    assert "missing tensors ['W_U']" in message and "W_E is (3, 8) but the config needs (10, 8)" in message


# ---- (b) manifest entries cannot reach outside the lab folder ----

@pytest.mark.parametrize("file_name", ["../tiny.safetensors", "/etc/passwd", "sub/tiny.safetensors", "..", ""])
def test_file_names_that_leave_the_folder_are_refused(tmp_path, file_name):
    saved_model(tmp_path / "lab")

    def escape(manifest):
        manifest["checkpoints"]["tiny"]["file"] = file_name
    edit_manifest(tmp_path / "lab", escape)
    with pytest.raises(CheckpointError, match="plain file name next to the manifest"):
        load_checkpoint("tiny", tmp_path / "lab")


def test_a_link_that_leads_out_of_the_folder_is_refused(tmp_path):
    _, path = saved_model(tmp_path / "lab")
    outside = tmp_path / "outside.safetensors"
    path.rename(outside)
    path.symlink_to(outside)
    with pytest.raises(CheckpointError, match="outside .*lab; lab files must lie in the lab folder"):
        load_checkpoint("tiny", tmp_path / "lab")


# ---- (c) devices, pipes and huge files are refused before anything is read ----

def test_a_device_is_refused_without_reading_it(tmp_path):
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero here")
    with pytest.raises(CheckpointError, match="is a character device, not a regular file"):
        sha256_of_file("/dev/zero")
    _, path = saved_model(tmp_path)
    path.unlink()
    path.symlink_to("/dev/zero")  # a link to a device: outside the folder as well as not a regular file
    with pytest.raises(CheckpointError, match="outside"):
        load_checkpoint("tiny", tmp_path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need a POSIX system")
def test_a_named_pipe_or_a_folder_is_refused_without_blocking(tmp_path):
    _, path = saved_model(tmp_path)
    path.unlink()
    os.mkfifo(path)  # opening a pipe for reading would wait for a writer forever
    with pytest.raises(CheckpointError, match="is a named pipe, not a regular file") as raised:
        load_checkpoint("tiny", tmp_path)
    assert COMMAND in str(raised.value)
    path.unlink()
    path.mkdir()
    with pytest.raises(CheckpointError, match="is a folder, not a regular file"):
        load_checkpoint("tiny", tmp_path)


def test_a_file_larger_than_the_limit_is_refused(tmp_path, monkeypatch):
    _, path = saved_model(tmp_path)
    monkeypatch.setattr(mha.lab.checkpoints, "MAX_FILE_BYTES", path.stat().st_size - 1)
    with pytest.raises(CheckpointError, match="bytes, more than the .* bytes it may have"):
        load_checkpoint("tiny", tmp_path)


# ---- (d) a malformed manifest is described, not a KeyError or TypeError ----

def set_entry(field, value):
    def change(manifest):
        manifest["checkpoints"]["tiny"][field] = value
    return change


def drop_entry_field(field):
    def change(manifest):
        del manifest["checkpoints"]["tiny"][field]
    return change


def replace_manifest(content):
    def change(manifest):
        manifest.clear()
        manifest["__replace__"] = content
    return change


@pytest.mark.parametrize("change, words", [
    (replace_manifest([1, 2]), r"it holds list \[1, 2\], but it must be a JSON object"),
    (replace_manifest(None), "it holds NoneType None, but it must be a JSON object"),
    (drop_entry_field("sha256"), r"checkpoints\['tiny'\] has no 'sha256' field"),
    (drop_entry_field("regenerate"), r"checkpoints\['tiny'\] has no 'regenerate' field"),
    (set_entry("seed", "3"), r"checkpoints\['tiny'\]\['seed'\] is str '3', but it must be a whole number"),
    (set_entry("steps", True), r"\['steps'\] is bool True, but it must be a whole number"),
    (set_entry("sha256", "abc"), "must be 64 lower-case hex digits"),
    (set_entry("file", 7), r"\['file'\] is int 7, but it must be a string"),
    (set_entry("config", {"vocab_size": 10}), "is not a valid TinyTransformerConfig"),
    (set_entry("config", {"vocab_size": 10, "max_seq_len": 6, "d_model": 8, "n_heads": 3}), "not divisible"),
    (set_entry("extra", []), r"\['extra'\] is list \[\], but it must be a JSON object"),
    (lambda manifest: manifest.update(checkpoints=["tiny"]), "its 'checkpoints' is list"),
    (lambda manifest: manifest.update(files={"a.json": None}), r"files\['a.json'\] is NoneType None"),
    (lambda manifest: manifest.update(format=2), "this version of mha reads format 1"),
    (lambda manifest: manifest["checkpoints"].update(tiny="tiny.safetensors"), r"checkpoints\['tiny'\] is str"),
])
def test_malformed_manifests_are_described(tmp_path, change, words):
    saved_model(tmp_path)
    path = tmp_path / MANIFEST_NAME
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest.get("__replace__", manifest)))
    for read in (read_manifest, checkpoint_names, lambda directory: load_checkpoint("tiny", directory),
                 lambda directory: load_json("a.json", directory)):
        with pytest.raises(CheckpointError, match="malformed") as raised:
            read(tmp_path)
        message = str(raised.value)
        assert re.search(words, message), message
        assert "python -m scripts.train_checkpoints" in message


@pytest.mark.parametrize("content, words", [(b"{not json", "cannot be read"), (b"\xff\xfe{}", "cannot be read"),
                                            (b"", "cannot be read")])
def test_a_manifest_that_is_not_json_is_described(tmp_path, content, words):
    (tmp_path / MANIFEST_NAME).write_bytes(content)
    with pytest.raises(CheckpointError, match=words):
        read_manifest(tmp_path)


def test_a_name_that_cannot_be_a_key_is_an_unknown_name(tmp_path):
    saved_model(tmp_path)
    with pytest.raises(CheckpointError, match="no checkpoint called \\['tiny'\\]"):
        load_checkpoint(["tiny"], tmp_path)
    with pytest.raises(CheckpointError, match="no result file called None"):
        load_json(None, tmp_path)


# ---- (e) saving the same weights always gives the same bytes ----

SAVE_IN_A_FRESH_PROCESS = textwrap.dedent("""
    import sys
    from mha.lab.checkpoints import save_checkpoint
    from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig
    config = TinyTransformerConfig(vocab_size=10, max_seq_len=6, d_model=8, n_layers=2, n_heads=2)
    save_checkpoint(TinyTransformer(config, seed=3), "tiny", seed=3, steps=7, task={"name": "copy_back", "distance": 1},
                    regenerate=sys.argv[2], training={"steps": 7}, extra={"note": "test"}, directory=sys.argv[1])
""")


@pytest.mark.slow
def test_saving_the_same_weights_gives_the_same_bytes_in_any_process(tmp_path):
    _, first = saved_model(tmp_path / "first")
    _, second = saved_model(tmp_path / "second")
    subprocess.run([sys.executable, "-c", SAVE_IN_A_FRESH_PROCESS, str(tmp_path / "fresh"), COMMAND], check=True,
                   env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "random"})
    fresh = tmp_path / "fresh" / "tiny.safetensors"
    assert first.read_bytes() == second.read_bytes() == fresh.read_bytes()
    manifests = [(tmp_path / folder / MANIFEST_NAME).read_bytes() for folder in ("first", "second", "fresh")]
    assert manifests[0] == manifests[1] == manifests[2]
    assert oct(first.stat().st_mode & 0o777) == oct(0o644)


def test_canonical_bytes_are_safetensors_bytes_with_sorted_metadata():
    generator = torch.Generator().manual_seed(0)
    tensors = {"b": torch.randn(3, 4, generator=generator), "a": torch.randn(5, generator=generator),
               "ids": torch.arange(6).reshape(2, 3), "half": torch.randn(3, generator=generator).half(),
               "flags": torch.tensor([True, False]), "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 3)}
    one_key = {"only": "a value"}  # with one key, safetensors' own order cannot vary
    assert canonical_safetensors(tensors, one_key) == safetensors_save(tensors, metadata=one_key)
    assert canonical_safetensors(tensors, {"z": "1", "a": "2"}) == canonical_safetensors(tensors, {"a": "2", "z": "1"})
    loaded = load_safetensors_bytes(canonical_safetensors(tensors, {"z": "1", "a": "2"}))
    assert loaded.keys() == tensors.keys() and all(torch.equal(loaded[key], tensors[key]) for key in tensors)
    with pytest.raises(ValueError, match="strings to strings"):
        canonical_safetensors(tensors, {"steps": 7})


# ---- the checkpoints the book ships (skipped until scripts/train_checkpoints.py has been run) ----

shipped = pytest.mark.skipif(not (LAB_DIRECTORY / MANIFEST_NAME).exists(),
                             reason="data/lab has not been generated; run python -m scripts.train_checkpoints")


@shipped
@pytest.mark.slow
def test_every_shipped_file_matches_the_manifest():
    manifest = read_manifest()
    for name in manifest["checkpoints"]:
        load_checkpoint(name)
    for file_name in manifest["files"]:
        load_json(file_name)


@shipped
def test_shipped_files_are_canonical_so_regenerating_them_changes_no_byte():
    """Re-saving every shipped checkpoint's tensors and metadata canonically gives back the very same file."""
    for name, entry in read_manifest()["checkpoints"].items():
        data = (LAB_DIRECTORY / entry["file"]).read_bytes()
        metadata = mha.lab.checkpoints._safetensors_metadata(data)
        assert metadata["name"] == name
        assert canonical_safetensors(load_safetensors_bytes(data), metadata) == data, name


@shipped
def test_regenerating_a_shipped_checkpoint_gives_the_committed_file(tmp_path):
    """The step-0 checkpoint is the freshly initialised model: rebuilding it from its seed gives the same file.

    Byte for byte on the CPU that made it. torch draws normals with the CPU's own vector instructions, so on
    another CPU the initial weights differ in their last bits (here within 1e-6): the header, the metadata and
    every tensor's name, shape and dtype must still be identical, and the values equal to that tolerance.
    """
    name = "induction_2layer_seed0_step00000"
    entry = read_manifest()["checkpoints"][name]
    model = TinyTransformer(TinyTransformerConfig.from_dict(entry["config"]), seed=entry["seed"])
    path = save_checkpoint(model, name, seed=entry["seed"], steps=entry["steps"], task=entry["task"],
                           regenerate=entry["regenerate"], training=entry["training"], extra=entry["extra"],
                           directory=tmp_path)
    rebuilt, committed = path.read_bytes(), (LAB_DIRECTORY / entry["file"]).read_bytes()
    header_length = int.from_bytes(committed[:8], "little")
    assert rebuilt[:8 + header_length] == committed[:8 + header_length], "header and metadata are byte-identical"
    rebuilt_tensors, committed_tensors = load_safetensors_bytes(rebuilt), load_safetensors_bytes(committed)
    assert rebuilt_tensors.keys() == committed_tensors.keys()
    for key, tensor in committed_tensors.items():
        assert torch.allclose(rebuilt_tensors[key], tensor, rtol=0, atol=1e-6), key
    if rebuilt != committed:
        assert torch.backends.cpu.get_cpu_capability() != "AVX2", "on the CPU kind that made it, every byte agrees"
    entry_rebuilt = read_manifest(tmp_path)["checkpoints"][name]
    assert {k: v for k, v in entry_rebuilt.items() if k != "sha256"} == {
        k: v for k, v in entry.items() if k != "sha256"
    }


@shipped
def test_shipped_induction_claims_hold_on_held_out_periods():
    """Each 2-layer seed: an induction head in layer 1, a previous-token head in layer 0; the 1-layer model: neither."""
    for name in [n for n in checkpoint_names() if n.startswith("induction_")]:
        model, info = load_checkpoint(name)
        if info.steps < info.training.get("steps", 0):
            continue  # intermediate checkpoints are allowed to be half-trained
        task = task_from_dict(info.task)
        assert isinstance(task, InductionTask)
        batch = task.held_out().sample(128, 2024)
        scores = head_role_scores(model, batch.inputs, batch.details["repeat_mask"])
        if model.config.n_layers == 2:
            assert scores["prefix_matching"][1].max() > 0.5, name
            assert scores["previous_token"][0].max() > 0.5, name
        else:
            assert scores["prefix_matching"].max() < 0.2, name
            assert scores["previous_token"].max() < 0.5, name
