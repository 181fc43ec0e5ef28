"""A checkpoint whose sha256 the manifest records is still refused when its tensors are not finite float32, and the
book's own manifest is itself verified against ``data/SHA256SUMS`` (mha.lab.checkpoints, chapter 3)."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch
from safetensors.torch import load as load_safetensors_bytes

import mha.data_files
import mha.lab.checkpoints
from mha.data_files import BOOK_DATA_FILES, DATA_DIRECTORY, SHA256_LIST
from mha.lab.checkpoints import MANIFEST_NAME, CheckpointError, load_checkpoint, read_manifest, save_checkpoint
from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig

CONFIG = TinyTransformerConfig(vocab_size=10, max_seq_len=6, d_model=8, n_layers=1, n_heads=2)


def _save(directory):
    model = TinyTransformer(CONFIG, seed=0)
    return model, save_checkpoint(model, "tiny", seed=0, steps=1, task={"name": "copy_back", "distance": 1},
                                  regenerate="python -m scripts.train_checkpoints --only tiny", directory=directory)


def _replace_tensor(path, name, tensor):
    """Rewrite checkpoint ``path`` with tensor ``name`` replaced, as safetensors writes it (metadata kept), and record
    the new file's sha256 in the manifest beside it, so that only the tensor's dtype or values are wrong."""
    from safetensors import safe_open
    from safetensors.torch import save

    with safe_open(path, "pt") as opened:
        metadata = opened.metadata()
    tensors = load_safetensors_bytes(path.read_bytes())
    data = save({**tensors, name: tensor}, metadata=metadata)
    path.write_bytes(data)
    manifest = json.loads((path.parent / MANIFEST_NAME).read_text())
    manifest["checkpoints"]["tiny"]["sha256"] = hashlib.sha256(data).hexdigest()
    (path.parent / MANIFEST_NAME).write_text(json.dumps(manifest))


@pytest.mark.parametrize(("change", "words"), [
    (lambda weight: weight > 0, "stores 'W_E' as torch.bool, but the model's weights are float32"),
    (lambda weight: weight.half(), "stores 'W_E' as torch.float16"),
    (lambda weight: weight.double(), "stores 'W_E' as torch.float64"),
    (lambda weight: weight.index_fill(0, torch.tensor([3]), float("nan")), "holds NaN or inf in 'W_E'"),
    (lambda weight: weight.index_fill(1, torch.tensor([0]), float("-inf")), "holds NaN or inf in 'W_E'"),
])
def test_a_checkpoint_of_another_dtype_or_with_nan_is_refused_not_cast(tmp_path, change, words):
    """load_state_dict would cast a BOOL, F16 or F64 tensor of the right shape to float32, and copy NaN."""
    model, path = _save(tmp_path)
    loaded, _ = load_checkpoint("tiny", tmp_path)  # the intact file loads, weights equal to the saved model's
    assert torch.equal(loaded.W_E, model.W_E)
    _replace_tensor(path, "W_E", change(model.state_dict()["W_E"]).contiguous())
    with pytest.raises(CheckpointError, match=f"checkpoint file .*tiny.safetensors {words}"):
        load_checkpoint("tiny", tmp_path)


@pytest.fixture
def data_layout(tmp_path, monkeypatch):
    """A data folder like the book's: its files linked, not copied, and an empty ``lab/``, set as the book's own."""
    data = (tmp_path / "data").resolve()
    (data / "lab").mkdir(parents=True)
    for name in BOOK_DATA_FILES:
        if not name.startswith("lab/"):
            (data / name).parent.mkdir(parents=True, exist_ok=True)
            (data / name).symlink_to(DATA_DIRECTORY / name)
    monkeypatch.setattr(mha.data_files, "DATA_DIRECTORY", data)
    monkeypatch.setattr(mha.lab.checkpoints, "LAB_DIRECTORY", data / "lab")
    return data


def test_saving_into_the_books_lab_records_the_manifest_and_a_tampered_manifest_is_refused(data_layout):
    lab = data_layout / "lab"
    _save(lab)
    recorded = dict(reversed(line.split("  ", 1)) for line in (data_layout / SHA256_LIST).read_text().splitlines())
    assert recorded["lab/manifest.json"] == hashlib.sha256((lab / MANIFEST_NAME).read_bytes()).hexdigest()
    assert read_manifest(lab)["checkpoints"]["tiny"]["steps"] == 1
    manifest = json.loads((lab / MANIFEST_NAME).read_text())
    manifest["checkpoints"]["tiny"]["steps"] = 10_000  # valid, and consistent with the checkpoint file
    (lab / MANIFEST_NAME).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    for read in (lambda: read_manifest(lab), lambda: load_checkpoint("tiny", lab)):
        with pytest.raises(CheckpointError, match="the checkpoint manifest .* is damaged, tampered with or out of "
                                                  "date: its sha256 is"):
            read()


def test_the_books_own_manifest_is_listed_with_its_sha256():
    recorded = dict(reversed(line.split("  ", 1)) for line in (DATA_DIRECTORY / SHA256_LIST).read_text().splitlines())
    manifest = DATA_DIRECTORY / "lab" / MANIFEST_NAME
    assert recorded["lab/manifest.json"] == hashlib.sha256(manifest.read_bytes()).hexdigest()
    assert read_manifest() == json.loads(manifest.read_bytes())
