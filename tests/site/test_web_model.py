"""The model the pages run (model.js, joined from src/mha/views/web/model/, on parts from mha.pretrained.web_export)
against the package.

Under Node, no browser: the JavaScript tokenizer must give the package's token ids on every code point and on
awkward and real sentences, refuse what the package refuses, and the forward pass must give the package's attention
weights within 0.01 and its sentence vectors within 1e-3, with and without heads removed. The WebAssembly SIMD
kernel and the plain-JavaScript fallback must agree to the bit, and the embedded kernel must be model_matmul.wat.
"""

from __future__ import annotations

import base64
import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mha.core.validation import check_no_lone_surrogates
from mha.corpora.treebank import EWT_DEV_PATH, read_ud_trees
from mha.pretrained.encoder import MiniLMEncoder
from mha.pretrained.tokenizer import load_tokenizer
from mha.pretrained.web_export import export_web_model
from mha.views.widget import web_file
from website.model_in_node import run_model_in_node  # the site build's runner of model.js under Node

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "src" / "mha" / "views" / "web"

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="needs Node.js (apt install nodejs)")

TWENTY_TOKENS = "The committee said on Tuesday that the new bridge would open to traffic early next spring here."
REMOVED = [[0, 3], [2, 5], [3, 0], [5, 11]]
AWKWARD = [
    "Café déjà vu, naïve façade: Ærøskøbing – Šibenik!",
    "東京は日本の首都です。北京和上海 are cities.",
    "I 🥰 emoji 😀👍🏽 and flags 🇫🇷 too",
    "Wait...!!! What?!?! (really) [sure] {ok} <tag> \"quoted\" 'single' #hash @at $5 %20 ^caret ~tilde `tick`",
    "Pneumonoultramicroscopicsilicovolcanoconiosis and " + "x" * 120 + " and antidisestablishmentarianism",
    "Mixed scripts: Привет мир, Γειά σου κόσμε, مرحبا بالعالم, שלום עולם, नमस्ते दुनिया, สวัสดี",
    "Control\x00chars\x07here\x1bthere\ttab\nnewline\r\x0bvertical\x0cfeed\ufffdreplacement\u200bzero\u00adsoft",
    "Numbers 3.14159, 1,000,000 and 42nd, 1e-10, 0x1F, ½ ¾ ² ³ ①",
    "İstanbul ΣΑΣ Straße ﬁnance ǅ ß ẞ Å Å",
    "Non\u00a0breaking\u2003em\u3000ideographic\u2028line\u2029para spaces",
    "a" + "\u0301" * 5 + " e\u0300\u0323 combining ñ",
    "Ⅻ ℃ ™ © ® ¶ § † ‡ • … ‰ ′ ″ ‹ › « » „ “ ” ‘ ’",
]


def run_node(folder: Path, sentences: list[dict], out: Path, *, simd: bool = True, time_runs: int = 0) -> dict:
    """website/model_in_node.js on ``sentences``, through the site's own runner; each run's arrays read back."""
    return run_model_in_node(folder, sentences, out, simd=simd, time_runs=time_runs, timeout=120)


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("web_model")
    return folder, export_web_model(folder)


@pytest.fixture(scope="module")
def encoder() -> MiniLMEncoder:
    return MiniLMEncoder.load()


def treebank_texts(count: int = 36) -> list[str]:
    trees = read_ud_trees(EWT_DEV_PATH, limit=400)
    texts = [" ".join(tree.words) for tree in trees if 4 <= len(tree.words) <= 40]
    return texts[::max(1, len(texts) // count)][:count]


def generated_texts(count: int = 12, seed: int = 7) -> list[str]:
    """Sentences of random whole-word vocabulary entries and punctuation, seeded."""
    vocab = [t for t in load_tokenizer().get_vocab() if t.isalpha() and not t.startswith("[")]
    vocab.sort()
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        words = [
            rng.choice(vocab) if rng.random() > 0.15 else rng.choice(",.;:!?-()'\"") for _ in range(rng.randint(3, 30))
        ]
        texts.append(" ".join(words).capitalize())
    return texts


def test_export_is_deterministic_and_a_twenty_token_sentence_loads_under_25_mb(exported, built_site):
    folder, manifest = exported
    again = built_site / "_vendor" / "mha" / "model"  # the site build's own export, in another process
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted(p.name for p in again.iterdir())
    assert all((folder / name).read_bytes() == (again / name).read_bytes() for name in names)

    # each .js carries the same bytes as its .bin
    part = (folder / "layer-2.js").read_text()
    assert part.startswith('mhaModelPart("layer-2", "') and part.endswith('");\n')
    assert base64.b64decode(part.split('"')[3]) == (folder / "layer-2.bin").read_bytes()

    ids = load_tokenizer()(TWENTY_TOKENS).input_ids
    assert len(ids) == 20
    rows = manifest["config"]["rows_per_chunk"]
    wanted = {"manifest", "vocab", "base", *(f"layer-{l}" for l in range(6)), *(f"words-{i // rows}" for i in ids)}
    total = sum((folder / f"{name}.bin").stat().st_size for name in wanted)
    print(f"bytes for the first 20-token sentence: {total:,} in {len(wanted)} parts")
    assert total <= 25_000_000


def test_tokenizer_matches_the_package_on_every_code_point(exported, tmp_path):
    """Each code point between two letters and after a space, 60 to a sentence: all of Unicode but the surrogates
    and the unassigned planes 3 to 13."""
    folder, _ = exported
    points = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and (c < 0x30000 or c >= 0xE0000)]
    texts = [" ".join(f"a{chr(c)}b c{chr(c)}" for c in points[i:i + 60]) for i in range(0, len(points), 60)]
    expected = [e.ids for e in load_tokenizer()(texts).encodings]
    report = run_node(folder, [{"text": t, "run": False} for t in texts], tmp_path)
    differ = [(t, r["error"]) for t, e, r in zip(texts, expected, report["results"], strict=True) if r.get("ids") != e]
    assert not differ, f"{len(differ)} sentences tokenised otherwise than the package, e.g. {differ[0]!r}"


def test_tokenizer_matches_the_package_on_awkward_and_real_text_and_refuses_what_it_refuses(exported, tmp_path):
    folder, _ = exported
    texts = AWKWARD + treebank_texts() + generated_texts()
    tokenizer = load_tokenizer()
    refused = ["", "   \n\t ", "\x00\x01\u200b", "half an emoji \ud83d here", "lone low \ude00 surrogate",
               "word " * 600]
    report = run_node(folder, [{"text": t, "run": False} for t in texts + refused], tmp_path)
    for text, result in zip(texts, report["results"][:len(texts)], strict=True):  # the refused ones follow
        encoding = tokenizer(text).encodings[0]
        assert result["error"] is None, (text, result["error"])
        assert (result["ids"], result["tokens"]) == (encoding.ids, encoding.tokens), text
        assert result["wordIds"] == encoding.word_ids, text
    errors = [r["error"] for r in report["results"][len(texts):]]
    assert all(errors), errors
    assert "empty" in errors[0] and "empty" in errors[1]
    assert "no characters the tokenizer keeps" in errors[2]
    # the same position and code unit as the package names
    for text, error in zip(refused[3:5], errors[3:5], strict=True):
        with pytest.raises(ValueError) as raised:
            check_no_lone_surrogates(text, "the text")
        assert re.search(r"at position \d+ \(U\+[0-9A-F]{4}", error).group() in str(raised.value)
    n_tokens = len(tokenizer("word " * 600, verbose=False).input_ids)
    assert f"{n_tokens} tokens long" in errors[5] and "only 512 positions" in errors[5]


def test_forward_pass_matches_the_package(exported, encoder, tmp_path):
    folder, _ = exported
    texts = [TWENTY_TOKENS] + AWKWARD[:4] + treebank_texts(16) + generated_texts(6)
    sentences = [{"text": t} for t in texts] + [{"text": t, "removed": REMOVED} for t in texts[:4]]
    report = run_node(folder, sentences, tmp_path)
    assert report["backend"] == "wasm-simd"
    worst_attention = worst_vector = 0.0
    for sentence, result in zip(sentences, report["results"], strict=True):
        head_mask = encoder.head_mask([tuple(p) for p in sentence["removed"]]) if "removed" in sentence else None
        trace = encoder.trace(sentence["text"], head_mask=head_mask)
        expected = trace.sentence()
        assert result["ids"] == trace.inputs.input_ids[0].tolist()
        worst_attention = max(worst_attention, float(np.abs(result["attention"] - expected.attention).max()))
        last = expected.hidden_states[-1].mean(axis=0)
        worst_vector = max(worst_vector, float(np.abs(result["vector"] - last / np.linalg.norm(last)).max()))
    print(f"largest attention difference {worst_attention:.4f}, sentence vector {worst_vector:.5f}")
    assert worst_attention < 0.01
    assert worst_vector < 1e-3

    # the plain-JavaScript fallback gives the same numbers to the bit
    fallback = run_node(folder, sentences[:1] + sentences[-1:], tmp_path / "js", simd=False)
    assert fallback["backend"] == "js"
    for mine, theirs in zip(fallback["results"], report["results"][:1] + report["results"][-1:], strict=True):
        assert np.array_equal(mine["attention"], theirs["attention"]) and np.array_equal(
            mine["hidden"], theirs["hidden"]
        )


def tampered_copy(folder: Path, tampered: Path, at: float) -> bytes:
    """The parts of ``folder`` in ``tampered`` (links), with one bit of layer 3's flipped at fraction ``at`` of its
    bytes; returns that part's new bytes."""
    tampered.mkdir()
    for path in folder.glob("*.bin"):
        if path.name != "layer-3.bin":
            (tampered / path.name).symlink_to(path)
    data = bytearray((folder / "layer-3.bin").read_bytes())
    data[int(len(data) * at)] ^= 0x01
    (tampered / "layer-3.bin").write_bytes(bytes(data))
    return bytes(data)


def test_a_tampered_part_is_refused_by_name(exported, tmp_path):
    folder, _ = exported
    tampered_copy(folder, tmp_path / "tampered", 0.5)
    report = run_node(tmp_path / "tampered", [{"text": "hello"}], tmp_path / "out")
    assert report["open_error"] and '"layer-3" does not match its sha256' in report["open_error"]


def test_the_embedded_kernel_is_model_matmul_wat(tmp_path):
    wat2wasm = shutil.which("wat2wasm")
    if wat2wasm is None:
        if os.environ.get("CI") == "true":
            pytest.fail("wat2wasm is missing on CI; apt-get install -y wabt")
        pytest.skip("needs wat2wasm (apt-get install -y wabt)")
    subprocess.run([wat2wasm, str(WEB / "model_matmul.wat"), "-o", str(tmp_path / "kernel.wasm")], check=True)
    embedded = re.search(r'const KERNEL_WASM_BASE64 = "([A-Za-z0-9+/=]+)";', web_file("model.js")).group(1)
    assert base64.b64decode(embedded) == (tmp_path / "kernel.wasm").read_bytes()


# ---------------------------------------------------------------- sha256 where the browser has none

FIPS_180_4_EXAMPLES = {  # FIPS 180-4's SHA-256 examples (NIST's "Examples with intermediate values")
    b"abc": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq":  # 448 bits
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
    b"a" * 10**6: "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
}


def test_the_javascript_sha256_gives_fips_180_4s_examples_and_hashlibs_digests(tmp_path):
    """model/sha256.js, run as an ES module under Node, on FIPS 180-4's examples and on random byte strings of every
    length around the padding's edges (55, 56, 63, 64 bytes ...) and longer, against Python's hashlib."""
    import hashlib
    import json

    rng = random.Random(0)
    lengths = [*range(0, 130), 1000, 4095, 4096, 65_537, 300_000]
    messages = [*FIPS_180_4_EXAMPLES, *(rng.randbytes(n) for n in lengths)]
    (tmp_path / "sha256.mjs").write_text((WEB / "model" / "sha256.js").read_text())
    (tmp_path / "messages.json").write_text(json.dumps([message.hex() for message in messages]))
    (tmp_path / "run.mjs").write_text(
        'import { readFileSync } from "node:fs";\nimport { sha256HexOf } from "./sha256.mjs";\n'
        'const messages = JSON.parse(readFileSync(process.argv[2], "utf8"));\n'
        'console.log(JSON.stringify(messages.map((hex) => sha256HexOf(Uint8Array.from(Buffer.from(hex, "hex"))))));\n')
    ran = subprocess.run([NODE, str(tmp_path / "run.mjs"), str(tmp_path / "messages.json")], capture_output=True,
                         text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-2000:]
    digests = json.loads(ran.stdout)
    assert digests[:3] == list(FIPS_180_4_EXAMPLES.values())
    assert digests == [hashlib.sha256(message).hexdigest() for message in messages]


def test_without_crypto_subtle_the_loader_checks_each_part_with_the_javascript_sha256(exported, tmp_path,
                                                                                   monkeypatch):
    """A page served over plain http:// has no crypto.subtle. Node is made into one (a preloaded script removes it):
    the parts still load, each matching the manifest's sha256 (written by hashlib at export), and a part with one bit
    flipped is still refused by name, with the digest the page computed."""
    import hashlib

    folder, _ = exported
    no_subtle = tmp_path / "no_subtle.cjs"
    no_subtle.write_text('Object.defineProperty(globalThis, "crypto", { value: {}, configurable: true, '
                         'writable: true });\n')
    monkeypatch.setenv("NODE_OPTIONS", f"--require {no_subtle}")
    report = run_node(folder, [{"text": "hello", "run": False}], tmp_path / "whole")
    assert not report.get("open_error"), report.get("open_error")
    data = tampered_copy(folder, tmp_path / "tampered", 1 / 3)
    report = run_node(tmp_path / "tampered", [{"text": "hello"}], tmp_path / "out")
    assert report["open_error"] and '"layer-3" does not match its sha256' in report["open_error"]
    assert hashlib.sha256(data).hexdigest() in report["open_error"]  # the page's own digest of what it was given
