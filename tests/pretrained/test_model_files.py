"""The pretrained model's files are pinned: an edited config or tokenizer in the package's own folder is refused, not
loaded silently (mha.pretrained.model_files; chapter 3). The installed package is never touched: its small files are
copied to a temporary folder (the weights linked), and the loaders are told that folder is the package's."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

import mha.pretrained.model_files
from mha.core.validation import InputError
from mha.pretrained.model_files import PRETRAINED_FILES_SHA256, EncoderConfig, read_model_folder, read_tokenizer_files
from mha.pretrained.tokenizer import default_model_path, load_tokenizer, load_wordpieces


@pytest.fixture
def model_copy(tmp_path):
    """A copy of the package's model folder: every file the book reads, the 87 MiB of weights linked."""
    folder = tmp_path / "model"
    folder.mkdir()
    for name in PRETRAINED_FILES_SHA256:
        if name == "model.safetensors":
            (folder / name).symlink_to(default_model_path() / name)
        else:
            shutil.copy(default_model_path() / name, folder / name)
    return folder


def _pin(monkeypatch, folder):
    monkeypatch.setattr(mha.pretrained.model_files, "_pinned_folder", lambda: folder.resolve())


def _edit_json(path, change):
    content = json.loads(path.read_text(encoding="utf-8"))
    change(content)
    path.write_text(json.dumps(content), encoding="utf-8")


def test_the_pins_are_the_sha256s_of_the_installed_release():
    for name, sha256 in PRETRAINED_FILES_SHA256.items():
        assert hashlib.sha256((default_model_path() / name).read_bytes()).hexdigest() == sha256, name


def test_an_edited_config_is_refused_in_the_packages_folder(model_copy, monkeypatch):
    _edit_json(model_copy / "config.json", lambda config: config.update(num_attention_heads=6))
    assert EncoderConfig.from_json(model_copy / "config.json").n_heads == 6  # another folder: a model of 6 heads
    _pin(monkeypatch, model_copy)
    for read in (lambda: EncoderConfig.from_json(model_copy / "config.json"), lambda: read_model_folder(model_copy)):
        with pytest.raises(ValueError, match="config.json is not the model's own model config: its sha256 is "
                                             "[0-9a-f]{64}, but the release the book pins"):
            read()


def test_the_intact_copy_reads_as_the_package_does(model_copy, monkeypatch):
    _pin(monkeypatch, model_copy)
    assert EncoderConfig.from_json(model_copy / "config.json") == \
        EncoderConfig.from_json(default_model_path() / "config.json")
    assert load_wordpieces(model_copy).vocabulary() == load_wordpieces().vocabulary()
    spec, settings = read_tokenizer_files(model_copy)
    assert json.loads(spec) == json.loads((default_model_path() / "tokenizer.json").read_bytes())
    assert settings["model_max_length"] == 512


def test_a_tokenizer_with_two_ids_swapped_is_refused_in_the_packages_folder(model_copy, monkeypatch):
    def swap(spec):
        vocabulary = spec["model"]["vocab"]
        vocabulary["cat"], vocabulary["dog"] = vocabulary["dog"], vocabulary["cat"]

    _edit_json(model_copy / "tokenizer.json", swap)
    _pin(monkeypatch, model_copy)
    for load in (load_wordpieces, load_tokenizer):
        with pytest.raises(InputError, match="tokenizer.json is not the model's own tokenizer file tokenizer.json"):
            load(model_copy)
    monkeypatch.undo()  # another folder than the package's: its own ids, "cat" tokenized as "dog" was
    assert load_wordpieces(model_copy).vocabulary()["cat"] == load_wordpieces().vocabulary()["dog"]


@pytest.mark.parametrize("name", ["tokenizer_config.json", "vocab.txt", "special_tokens_map.json"])
def test_any_tokenizer_file_transformers_reads_is_pinned(model_copy, monkeypatch, name):
    with open(model_copy / name, "a", encoding="utf-8") as handle:
        handle.write("\n")
    _pin(monkeypatch, model_copy)
    with pytest.raises(InputError, match=f"{name} is not the model's own tokenizer file {name}"):
        load_tokenizer(model_copy)


def test_an_oversized_tokenizer_config_is_refused_before_it_is_parsed(model_copy, monkeypatch):
    """In any folder, pinned or not: a bounded read, so a huge file is not read into memory."""
    import mha.data_files

    def parse(*args, **kwargs):
        raise AssertionError("parsed: the size was not checked first")

    (model_copy / "tokenizer_config.json").write_bytes(b" " * (2**20 + 1))
    monkeypatch.setattr(mha.pretrained.model_files, "parse_json", parse)
    monkeypatch.setattr(mha.data_files, "parse_json", parse)
    with pytest.raises(InputError, match="tokenizer_config.json is 1,048,577 bytes, more than the 1,048,576"):
        read_tokenizer_files(model_copy, error=InputError)
