"""Hostile JSON and model files, each given to the loader that reads it, in a child capped in memory and CPU-time.

Measuring the nesting of JSON used to strip strings with a regular expression that takes time quadratic in a run of
escaped quotes (tens of kilobytes took seconds; a megabyte, hours). Each file here holds megabytes of them, so only
a pass that grows linearly with the text finishes within the child's CPU-time limit
(:data:`hostile.CPU_SECONDS_PER_CASE`); a wall clock is never read. A tokenizer file that is a device is refused
without reading it (mha.data_files, mha.lab.checkpoints, mha.pretrained.model_files; chapters 2 to 4).
"""

from __future__ import annotations

import os
import shutil

import pytest
from hostile import Case, run_cases

ESCAPED_QUOTES = '\\"' * 4_000_000  # 8 MB of \" : no string ever opens, every quote is escaped


@pytest.mark.slow
def test_megabytes_of_escaped_quotes_are_refused_by_every_json_loader_in_linear_time(tmp_path):
    from mha.pretrained.tokenizer import default_model_path

    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "manifest.json").write_text('{"checkpoints": ' + ESCAPED_QUOTES + "}")
    (tmp_path / "spread.json").write_text('{"counts": ' + ESCAPED_QUOTES + "}")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text('{"hidden_size": ' + ESCAPED_QUOTES[:1_000_000] + "}")
    shutil.copy(default_model_path() / "tokenizer.json", tmp_path / "model")
    (tmp_path / "model" / "tokenizer_config.json").write_text('{"pad_token": ' + ESCAPED_QUOTES[:1_000_000] + "}")
    setup = f"""
        from pathlib import Path
        from mha.analysis.caveats.ablation import load_pruning_spread
        from mha.data_files import parse_json
        from mha.lab.checkpoints import load_checkpoint
        from mha.pretrained.model_files import EncoderConfig
        from mha.pretrained.tokenizer import load_wordpieces
        tmp = Path({str(tmp_path)!r})
    """
    cases = [
        Case("a lab manifest", "load_checkpoint('tiny', tmp / 'lab')", "CheckpointError", "cannot be read as JSON"),
        Case("a stored result", "load_pruning_spread(tmp / 'spread.json')", "ValueError", "cannot be read as JSON"),
        Case("a model config.json of 1 MB", "EncoderConfig.from_json(tmp / 'model' / 'config.json')", "ValueError",
             "cannot be read as JSON"),
        Case("a tokenizer_config.json of 1 MB", "load_wordpieces(tmp / 'model')", "InputError",
             "cannot be read as JSON"),
        Case("valid JSON: one string of 8 MB of escaped quotes", f"""
             value = parse_json('["' + {ESCAPED_QUOTES[:4]!r} * 2_000_000 + '"]', what="x", path="p", how="")
             raise LookupError(f"parsed a string of {{len(value[0]):,}} quotes")""",
             "LookupError", "parsed a string of 4,000,000 quotes"),
    ]
    assert run_cases(setup, cases) == []


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero here")
def test_a_tokenizer_config_that_is_a_device_is_refused_without_reading_it(tmp_path):
    """Read with no bound, /dev/zero fills memory until the allocator fails."""
    from mha.pretrained.tokenizer import default_model_path

    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(default_model_path() / "tokenizer.json", folder)
    (folder / "tokenizer_config.json").symlink_to("/dev/zero")
    setup = f"""
        from pathlib import Path
        from mha.pretrained.tokenizer import load_tokenizer, load_wordpieces
        folder = Path({str(folder)!r})
    """
    cases = [Case(f"{loader}: tokenizer_config.json is /dev/zero", f"{loader}(folder)", "InputError",
                  "tokenizer_config.json is a character device, not a regular file")
             for loader in ("load_wordpieces", "load_tokenizer")]
    assert run_cases(setup, cases) == []
