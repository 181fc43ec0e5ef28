"""Every file the book reads is verified before it is trusted (mha.data_files; chapters 2 to 4 read them)."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
from hostile import Case, run_cases

from mha.data_files import BOOK_DATA_FILES, DATA_DIRECTORY, SHA256_LIST, _json_depth, parse_json


def test_the_list_of_sha256s_matches_the_files_hashed_here():
    lines = (DATA_DIRECTORY / SHA256_LIST).read_text(encoding="utf-8").splitlines()
    recorded = dict(reversed(line.split("  ", 1)) for line in lines)
    assert sorted(recorded) == sorted(BOOK_DATA_FILES)
    for name, sha256 in recorded.items():
        assert hashlib.sha256((DATA_DIRECTORY / name).read_bytes()).hexdigest() == sha256, name


@pytest.mark.parametrize("value", [[], {"a": [1, {"b": "[[[ \" {{"}]}, [[[[]]]], "plain", {"k": {"k": {"k": 1}}},
                                   ["\\", ["\\\"[", {"\\\\": "]]\\"}]], {"\"[": ["\\\\\"{", [["\\"]]]},
                                   ["é[\"", "\u2028", ["\\\\\\\"]]]"]]])
def test_json_depth_agrees_with_a_walk_of_the_parsed_value(value):
    def depth(item) -> int:
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        return 0 if children is None else 1 + max((depth(child) for child in children), default=0)

    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False)):  # runs of backslashes before quotes
        assert _json_depth(text) == _json_depth(text.encode()) == depth(value)
        assert parse_json(text.encode(), what="x", path="p", how="") == value


class Refused(Exception):
    """The error class a caller of parse_json asks for: every refusal must come as this, never a bare ValueError."""


@pytest.mark.parametrize(("text", "words"), [
    ("[" + "9" * 5000 + "]", "holds a number of 5,000 characters .*more than the 100"),
    ('{"seed": -' + "1" * 101 + "}", "holds a number of 102 characters"),
    ("[0." + "5" * 200 + "]", "holds a number of 202 characters"),
    ("[NaN]", "holds NaN, but a number in a data file must be finite"),
    ('{"a": Infinity}', "holds Infinity"),
    ("[-Infinity]", "holds -Infinity"),
    ("[1e999]", "holds 1e999"),  # a float that overflows to inf
    ("[1, 2", "cannot be read as JSON"),
])
def test_parse_json_refuses_long_numbers_and_non_finite_ones_as_the_callers_error(text, words):
    with pytest.raises(Refused, match=f"the file p.json {words}(.|\n)*Fix it"):
        parse_json(text.encode(), what="the file", path="p.json", how="Fix it.", error=Refused)


def test_parse_json_refuses_a_file_over_its_size_before_any_work(monkeypatch):
    import mha.data_files

    def depth_pass(text):
        raise AssertionError("the nesting was measured: the size was not checked first")

    monkeypatch.setattr(mha.data_files, "_json_depth", depth_pass)
    monkeypatch.setattr(mha.data_files, "MAX_JSON_BYTES", 1000)
    with pytest.raises(Refused, match="the file p.json holds 1,001 bytes of JSON, more than the 1,000"):
        parse_json(b" " * 999 + b"[]", what="the file", path="p.json", how="", error=Refused)


def _copy_with_list(name: str, folder, change=lambda text: text):
    """``folder/name``: the book's file, changed by ``change``, listed in ``folder/SHA256SUMS`` with its new sha256."""
    folder.mkdir(parents=True, exist_ok=True)
    data = change((DATA_DIRECTORY / name).read_text(encoding="utf-8")).encode("utf-8")
    (folder / name).write_bytes(data)
    (folder / SHA256_LIST).write_text(f"{hashlib.sha256(data).hexdigest()}  {name}\n")
    return folder / name


def test_a_stored_result_holding_nan_or_infinity_is_refused(tmp_path):
    """Infinity and NaN are not JSON, but Python's json reads them; a stored curve holding one is refused, even when
    its folder's list records its sha256."""
    from mha.analysis.caveats.ablation import load_pruning_spread

    intact = load_pruning_spread(_copy_with_list("pruning_spread.json", tmp_path / "intact"))
    assert intact["counts"] == json.loads((DATA_DIRECTORY / "pruning_spread.json").read_bytes())["counts"]
    for constant in ("NaN", "Infinity", "-Infinity"):
        path = _copy_with_list("pruning_spread.json", tmp_path / constant,
                               lambda text, constant=constant: text.replace("0.9929", constant, 1))
        with pytest.raises(ValueError, match=f"holds {constant}, but a number in a data file must be finite"):
            load_pruning_spread(path)


def _tamper(text: str) -> str:
    """A change that the shape checks of load_pattern_fits cannot see: only the sha256 tells it."""
    return text.replace("Single heads", "Tampered heads", 1)


def test_a_link_out_of_the_listed_folder_is_refused_and_one_inside_it_read(tmp_path):
    """A data file replaced by a link to a tampered copy elsewhere was read unverified: the list of the folder the
    link leads to (none) was consulted instead of the list of the folder it stands in."""
    from mha.core.low_rank_fitting import PatternFitsError, load_pattern_fits

    tampered = _copy_with_list("pattern_fits.json", tmp_path / "outside", _tamper)
    (tmp_path / "outside" / SHA256_LIST).unlink()  # a folder without a list: its files are read unverified
    data = tmp_path / "data"
    _copy_with_list("pattern_fits.json", data / "real")
    (data / SHA256_LIST).write_text((data / "real" / SHA256_LIST).read_text().replace("  ", "  real/"))
    (data / "real" / SHA256_LIST).unlink()
    inside = data / "pattern_fits.json"
    inside.symlink_to(data / "real" / "pattern_fits.json")  # stays in the folder: read, checked as real/...
    assert load_pattern_fits(inside).targets == load_pattern_fits().targets
    inside.unlink()
    inside.symlink_to(tampered)
    with pytest.raises(PatternFitsError, match=f"is a link to {tampered}, outside {data}(.|\n)*Replace the link"):
        load_pattern_fits(inside)


def test_a_link_out_of_the_books_data_folder_is_refused_even_to_a_folder_with_its_own_list(tmp_path, monkeypatch):
    """A link from the data folder to a tampered copy beside which a list that matches it was planted."""
    import mha.data_files
    from mha.core.low_rank_fitting import PatternFitsError, load_pattern_fits

    tampered = _copy_with_list("pattern_fits.json", tmp_path / "outside", _tamper)
    data = (tmp_path / "data").resolve()
    data.mkdir()
    monkeypatch.setattr(mha.data_files, "DATA_DIRECTORY", data)  # the book's data folder, with no list of its own
    (data / "pattern_fits.json").symlink_to(tampered)
    with pytest.raises(PatternFitsError, match=f"is a link to {tampered}, outside {data}"):
        load_pattern_fits(data / "pattern_fits.json")


def test_a_tampered_copy_of_a_book_file_is_refused_and_an_intact_one_read(tmp_path):
    from mha.core.low_rank_fitting import PatternFitsError, load_pattern_fits

    shutil.copy(DATA_DIRECTORY / "pattern_fits.json", tmp_path / "pattern_fits.json")
    (tmp_path / SHA256_LIST).write_text(next(line for line in (DATA_DIRECTORY / SHA256_LIST).read_text().splitlines()
                                             if line.endswith("  pattern_fits.json")) + "\n")
    assert load_pattern_fits(tmp_path / "pattern_fits.json").targets == load_pattern_fits().targets
    with open(tmp_path / "pattern_fits.json", "ab") as handle:
        handle.write(b" ")  # one byte more: still valid JSON, and still refused
    with pytest.raises(PatternFitsError, match="tampered with or out of date: its sha256 is"):
        load_pattern_fits(tmp_path / "pattern_fits.json")


def test_read_verified_json_gives_the_files_json_and_how_to_restore_it(tmp_path):
    """The one reading of a stored JSON result that the loaders share: the value json gives for the bytes, and the
    sentence naming the command that regenerates the file; a changed byte is refused with that sentence."""
    from mha.data_files import read_verified_json

    name = "single_removals.json"
    shutil.copy(DATA_DIRECTORY / name, tmp_path / name)
    (tmp_path / SHA256_LIST).write_text(next(line for line in (DATA_DIRECTORY / SHA256_LIST).read_text().splitlines()
                                             if line.endswith(f"  {name}")) + "\n")
    regenerate = "python -m scripts.single_removals"
    content, how = read_verified_json(tmp_path / name, what="the removals", regenerate=regenerate, limit=10**6)
    assert content == json.loads((DATA_DIRECTORY / name).read_bytes()) and regenerate in how
    with open(tmp_path / name, "ab") as handle:
        handle.write(b" ")
    with pytest.raises(ValueError, match=r"the removals .* tampered with(.|\n)*python -m scripts\.single_removals"):
        read_verified_json(tmp_path / name, what="the removals", regenerate=regenerate, limit=10**6)


@pytest.mark.parametrize(("module", "loader", "name", "script"), [
    ("mha.analysis.coreference_and_content.coreference", "load_lean_change_without_each_head",
     "coreference_removal.json", "python -m scripts.coreference_removal"),
    ("mha.analysis.caveats.ablation", "load_single_removals", "single_removals.json",
     "python -m scripts.single_removals"),
    ("mha.analysis.caveats.ablation", "load_triples_pruning", "triples_pruning.json",
     "python -m scripts.triples_pruning"),
])
def test_a_stored_measurement_is_read_only_intact_and_its_error_names_its_script(tmp_path, module, loader, name,
                                                                                 script):
    import importlib

    load = getattr(importlib.import_module(module), loader)
    shutil.copy(DATA_DIRECTORY / name, tmp_path / name)
    (tmp_path / SHA256_LIST).write_text(next(line for line in (DATA_DIRECTORY / SHA256_LIST).read_text().splitlines()
                                             if line.endswith(f"  {name}")) + "\n")
    load(tmp_path / name)  # the intact copy is read
    with open(tmp_path / name, "ab") as handle:
        handle.write(b" ")  # one byte more: still valid JSON, and still refused
    with pytest.raises(ValueError, match=f"(?s)tampered with or out of date.*{script}"):
        load(tmp_path / name)
    with pytest.raises(ValueError, match=f"(?s)is missing.*{script}"):
        load(tmp_path / "absent.json")


GOOD_TREE = "1\tDogs\tdog\tNOUN\t_\t_\t2\tnsubj\t_\t_\n2\tbark\tbark\tVERB\t_\t_\t0\troot\t_\t_\n"


def _sentence(heads: list[str], ids: tuple[str, ...] = ("1", "2", "3")) -> str:
    forms = ("Dogs", "bark", "loudly")
    return "".join(f"{i}\t{form}\t{form}\tX\t_\t_\t{head}\tdep\t_\t_\n"
                   for i, form, head in zip(ids, forms, heads, strict=True))


HOSTILE_TREEBANKS = {  # name: (text, message fragment); each comes after one good sentence, so it starts at line 4
    "a cycle": (_sentence(["2", "3", "1"]), "no root"),
    "a cycle beside the root": (_sentence(["0", "3", "2"]), "has a cycle"),
    "two roots": (_sentence(["0", "0", "2"]), "is already the root"),
    "a duplicate id": (_sentence(["2", "0", "2"], ("1", "2", "2")), "word id 2 ('loudly') appears twice"),
    "a head out of range": (_sentence(["2", "0", "99"]), "points to head 99"),
    "a head of -1": (_sentence(["2", "0", "-1"]), "points to head -1"),
    "a head of _": (_sentence(["2", "0", "_"]), "has no HEAD"),
}


@pytest.mark.slow
def test_hostile_files_are_refused_in_a_capped_process(tmp_path):
    from safetensors.torch import save_file

    from mha.pretrained.encoder import MiniLMEncoder

    def write(name: str, content: str | bytes) -> str:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
        return str(path)

    deep = "[" * 100_000 + "]" * 100_000
    # the lab: a manifest nested 100,000 deep, and manifests that ask for huge models or a huge seed
    write("deep_lab/manifest.json", deep)
    entry = {"file": "tiny.safetensors", "sha256": "0" * 64, "seed": 0, "steps": 1, "task": {}, "regenerate": "x",
             "config": {"vocab_size": 8, "max_seq_len": 8}}
    for name, change in {"wide": {"config": {"vocab_size": 2**20, "max_seq_len": 8, "d_model": 2**14}},
                         "layers": {"config": {"vocab_size": 8, "max_seq_len": 8, "n_layers": 10**6}},
                         "seed": {"seed": 2**70}}.items():
        write(f"{name}_lab/manifest.json", json.dumps({"checkpoints": {"tiny": {**entry, **change}}, "files": {}}))
    deep_result = {"checkpoints": {}, "files": {"r.json": {"sha256": hashlib.sha256(deep.encode()).hexdigest(),
                                                           "regenerate": "x"}}}
    write("result_lab/manifest.json", json.dumps(deep_result))
    write("result_lab/r.json", deep)
    header = deep.encode()
    write("header.safetensors", len(header).to_bytes(8, "little") + header)
    # the pretrained encoder: a config nested deep, one that asks for 10**8 words, and weights of the wrong kind
    model = MiniLMEncoder.load().model_path
    config = json.loads((model / "config.json").read_text())
    write("deep_model/config.json", deep)
    write("deep_model/model.safetensors", b"")
    write("huge_model/config.json", json.dumps({**config, "vocab_size": 10**8}))
    write("huge_model/model.safetensors", b"")
    from safetensors.torch import load_file
    state = load_file(model / "model.safetensors")
    for kind, change in {"f16": lambda t: t.half(), "bool": lambda t: t > 0, "i64": lambda t: t.long(),
                         "nan": lambda t: t * float("nan")}.items():
        folder = tmp_path / f"{kind}_model"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(config))
        name = "embeddings.LayerNorm.bias" if kind == "i64" else "embeddings.word_embeddings.weight"  # fits the size
        save_file({**state, name: change(state[name]).contiguous()}, folder / "model.safetensors")
    # the data files of chapters 2 to 4
    write("deep_fits.json", deep)
    write("hello.json", '"hello"')
    for name, (text, _) in HOSTILE_TREEBANKS.items():
        write(f"trees/{name}.conllu", GOOD_TREE + "\n" + text + "\n")
    write("trees/utf16.conllu", GOOD_TREE.encode("utf-16"))
    write("trees/latin1.conllu", GOOD_TREE.replace("Dogs", "Dögs").encode("latin-1"))

    setup = f"""
        import torch
        from pathlib import Path
        from mha.lab.checkpoints import read_manifest, load_checkpoint, load_json, _safetensors_metadata
        from mha.core.low_rank_fitting import load_pattern_fits
        from mha.analysis.caveats.ablation import load_pruning_spread
        from mha.analysis.caveats.probing import read_labelled_sentences
        from mha.corpora.treebank import read_conllu, read_ud_trees
        from mha.book import citation_text
        from mha.pretrained.encoder import MiniLMEncoder
        from mha.pretrained.model_files import PRETRAINED_WEIGHTS_SHA256
        tmp = Path({str(tmp_path)!r})
    """
    cases = [
        Case("deep manifest", "read_manifest(tmp / 'deep_lab')", "CheckpointError", "100,000 deep"),
        Case("deep result file", "load_json('r.json', tmp / 'result_lab')", "CheckpointError", "100,000 deep"),
        Case("deep checkpoint header", "_safetensors_metadata((tmp / 'header.safetensors').read_bytes())",
             "ValueError", "100,000 deep"),
        Case("manifest asks for 64 GB", "load_checkpoint('tiny', tmp / 'wide_lab')", "CheckpointError",
             "LIMITS['elements']"),
        Case("manifest asks for a million layers", "load_checkpoint('tiny', tmp / 'layers_lab')", "CheckpointError",
             "LIMITS['layers']"),
        Case("manifest seed 2**70", "load_checkpoint('tiny', tmp / 'seed_lab')", "CheckpointError",
             "a seed must be in 0 .. 2**64 - 1"),
        Case("deep config.json", "MiniLMEncoder.from_folder(tmp / 'deep_model')", "ValueError", "100,000 deep"),
        Case("config asks for 10**8 words", "MiniLMEncoder.from_folder(tmp / 'huge_model')", "SizeLimitError",
             "vocab_size, hidden_size"),
        *[Case(f"weights stored as {kind}", f"MiniLMEncoder.from_folder(tmp / '{kind}_model')", "ValueError", words)
          for kind, words in {"f16": "as torch.float16", "bool": "as torch.bool", "i64": "as torch.int64",
                              "nan": "holds NaN or inf"}.items()],
        Case("a copy of the weights that is not the pinned release", "MiniLMEncoder.from_folder(tmp / 'nan_model', "
             "sha256=PRETRAINED_WEIGHTS_SHA256)", "ValueError", "is not the model's own weights file"),
        Case("deep pattern fits", "load_pattern_fits(tmp / 'deep_fits.json')", "PatternFitsError", "100,000 deep"),
        Case("pruning spread 'hello'", "load_pruning_spread(tmp / 'hello.json')", "ValueError", "malformed"),
        Case("pruning spread from /dev/zero", "load_pruning_spread('/dev/zero')", "ValueError", "character device"),
        Case("citations from /dev/zero", "citation_text('x', labels_path='/dev/zero')", "ValueError",
             "character device"),
        *[Case(f"{reader}: {name}", f"{reader}(tmp / 'trees' / {name + '.conllu'!r})", "ValueError", words)
          for name, (_, words) in HOSTILE_TREEBANKS.items()
          for reader in ("read_conllu", "read_ud_trees", "read_labelled_sentences")],
        *[Case(f"{reader}: the line is named", f"{reader}(tmp / 'trees' / 'two roots.conllu')", "ValueError",
               "starts at line 4") for reader in ("read_conllu", "read_ud_trees", "read_labelled_sentences")],
        *[Case(f"{reader}: {name}", f"{reader}(tmp / 'trees' / '{name}.conllu')", "ValueError", words)
          for name, words in {"utf16": "UTF-16 byte-order mark", "latin1": "line 1 holds a byte"}.items()
          for reader in ("read_conllu", "read_ud_trees", "read_labelled_sentences")],
    ]
    assert run_cases(setup, cases) == []


@pytest.mark.parametrize("change, words", [({"head_counts": "1248"}, "'head_counts' is '1248', but it must be a list"),
                                           ({"runs": None}, "'runs' is None"),
                                           ({"d_model": "32"}, "'d_model' is '32', but it must be a whole number")])
def test_a_malformed_head_count_study_names_the_field(change, words):
    from mha.lab.checkpoints import load_json
    from mha.lab.head_count_study import STUDY_FILE, load_study, study_from_content

    content = {**load_json(STUDY_FILE), **change}
    with pytest.raises(ValueError, match=words):
        study_from_content({key: value for key, value in content.items() if value is not None})
    assert load_study().head_counts == tuple(load_json(STUDY_FILE)["head_counts"])


def test_a_generous_limit_is_not_a_buffer_of_that_size(tmp_path):
    """The read allocates for the file's size: a limit of a petabyte reads a small file, not a MemoryError."""
    from mha.data_files import read_data_file

    (tmp_path / "small.json").write_bytes(b'{"a": 1}')
    assert read_data_file(tmp_path / "small.json", what="x", how="", limit=10**15) == b'{"a": 1}'


def test_a_list_of_sha256s_that_is_a_link_out_of_its_folder_is_not_trusted(tmp_path):
    from mha.data_files import read_verified_file

    planted = _copy_with_list("pattern_fits.json", tmp_path / "outside", _tamper)
    (tmp_path / "data").mkdir()
    shutil.copy(planted, tmp_path / "data" / "pattern_fits.json")
    (tmp_path / "data" / SHA256_LIST).symlink_to(tmp_path / "outside" / SHA256_LIST)  # it lists the tampered bytes
    with pytest.raises(ValueError, match=f"{SHA256_LIST} is a link to .*outside its folder, so it is not trusted"):
        read_verified_file(tmp_path / "data" / "pattern_fits.json", what="the fits", how="", limit=10**6)
