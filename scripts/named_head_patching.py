"""Patch every head the book names between minimal pairs, with a readout that can move: data/named_head_patching.json.

Run from the repository root:

    python -m scripts.named_head_patching

Section 4.1 ("Attention is not explanation") sets what patching shows beside what the maps show, for the heads that
chapter 3 and the claims page name. Three kinds of pair:

* **Treebank edits** (:func:`edit_pairs`): a sentence of UD English-EWT dev and the same sentence with one word of a
  dependency arc replaced by another word of the same part of speech, the same morphological features and the same
  number of word pieces (another lemma, drawn with a seeded generator from the treebank's own words). Three arcs:
  ``obj->verb`` (the verb of a direct object is replaced; read at the object), ``subj->verb`` (the verb of a nominal
  subject is replaced; read at the subject) and ``verb->obj`` (the object is replaced; read at the verb). One pair
  per sentence, at most :data:`PAIRS_PER_RELATION` sentences per arc. Two readouts of each run
  (:func:`pair_readout`): the **word readout**, how much closer the read word's final vector (the mean of its pieces)
  is to its own clean vector in the first sentence than in the second, ``cos(x, x_first) - cos(x, x_second)``; and
  the **sentence readout**, the same for the model's sentence vector. Both differ by ``2 (1 - cos)`` between the two
  clean sentences, always positive, and a patched head moves them by a share of that.
* every head of the layers that hold a named head (and, on the ``obj->verb`` pairs, of the layers that hold a
  [CLS] sink) is patched both ways (:func:`mha.analysis.pair_patching.patch_between_halves`), so that each named
  head can be set against the other heads of its layer, and the result stored as
  :class:`mha.analysis.pair_patching.PairPatching` per arc and readout, rounded to 6 decimals;
* **the tiny induction model** (``induction_2layer_seed0`` of ``data/lab``; :func:`induction_pairs`): held-out
  sequences ``[noise][A][A]`` and the same sequence with one token of the first ``A`` replaced by an unseen token.
  A *value* edit replaces the answer, so that induction at the query now predicts the replacement (readout: the
  logit of the clean answer minus that of the replacement); a *match* edit replaces the earlier occurrence of the
  query's token, so that there is nothing to match (readout: the log-probability of the clean answer). Every head,
  and the previous-token and induction heads as sets, is patched both ways (:func:`tiny_head_patching`).

The sentences of the treebank are split in halves with :func:`mha.corpora.treebank.split_sentences` (seed 0, as in
section 3.2); the [CLS]-sink heads are chosen on the first half (:func:`sink_heads`), and section 4.1 reports every
head on the second: only sentences of the second half are edited and patched. Precomputed because the patched
runs take minutes. The file's sha256 is recorded in data/SHA256SUMS.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from mha.analysis.pair_patching import NAMED_HEAD_PATCHING_PATH, PairPatching, patch_between_halves
from mha.corpora.treebank import EWT_DEV_PATH, UDTree, read_ud_trees, split_sentences
from mha.data_files import write_recorded_json
from mha.pretrained.encoder import MiniLMEncoder
from mha.pretrained.sentence_embedding import sentence_embeddings
from mha.pretrained.traces import EncoderTrace
from mha.pretrained.word_maps import word_units

PAIRS_PER_RELATION = 96
MAX_WORDS = 30
SINK_BAR = 0.7
"""A head is a [CLS] sink when word queries put at least this share of its weight on [CLS] (3.1's highest bar)."""
SINK_RELATION = "obj->verb"
"""The pairs on which the sink heads are patched (every head of their layers), read through the sentence vector."""
TINY_MODEL = "induction_2layer_seed0"
TINY_PAIRS = 512

RELATIONS = {
    # name: (deprel of the dependent, upos of the dependent, upos of its head, edited word, read word)
    "obj->verb": ("obj", ("NOUN", "PROPN", "PRON"), ("VERB",), "head", "dependent"),
    "subj->verb": ("nsubj", ("NOUN", "PROPN", "PRON"), ("VERB",), "head", "dependent"),
    "verb->obj": ("obj", ("NOUN",), ("VERB",), "dependent", "head"),
}
"""The three arcs patched: the read word attends to the edited one in the arc's direction (3.2's naming)."""

NAMED_HEADS = {
    # (relation, layer, head): where the book names it
    ("obj->verb", 2, 0): "3.2: best head for object -> verb on the treebank",
    ("subj->verb", 2, 8): "3.2: best head for subject -> verb on the treebank",
    ("verb->obj", 2, 8): "3.2: best head for verb -> object on the treebank",
    ("verb->obj", 3, 1): "3.2: best head for verb -> object on the templates; 3.3's coreference head",
}


@dataclass(frozen=True)
class EditPair:
    """One treebank sentence and its edit: ``tree`` (index), ``edited`` and ``read`` (word indices), the words of
    both sentences."""

    tree: int
    edited: int
    read: int
    first: tuple[str, ...]
    second: tuple[str, ...]


def replacement_candidates(trees: Sequence[UDTree]) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """Every lower-case alphabetic word form of the treebank as ``(upos, feats) -> sorted [(form, lemma)]``."""
    found: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for tree in trees:
        for word, upos, lemma, feats in zip(tree.words, tree.upos, tree.lemmas, tree.feats, strict=True):
            if word.isalpha() and word.islower():
                found.setdefault((upos, feats), set()).add((word, lemma))
    return {key: sorted(values) for key, values in found.items()}


def edit_pairs(encoder: MiniLMEncoder, trees: Sequence[UDTree], relation: str, *, among: Sequence[int] | None = None,
               limit: int = PAIRS_PER_RELATION, max_words: int = MAX_WORDS, seed: int = 0) -> list[EditPair]:
    """At most ``limit`` minimal pairs for ``relation`` (a key of :data:`RELATIONS`), one per sentence (4.1).

    In each sentence of at most ``max_words`` words, the first arc of the relation whose edited word is lower-case
    alphabetic and has another word form of the treebank with the same UPOS and features, another lemma and the same
    number of word pieces; that word replaces it, drawn with ``np.random.default_rng(seed)`` from the sorted
    candidates. Sentences (those numbered in ``among``, by default all) are taken in the order of a seeded shuffle,
    so the pairs are a random sample of them. Replacements are drawn from the words of all of ``trees``.
    """
    if relation not in RELATIONS:
        raise ValueError(f"relation must be one of {sorted(RELATIONS)}, got {relation!r}.")
    deprel, dependent_upos, head_upos, edited_role, _ = RELATIONS[relation]
    candidates = replacement_candidates(trees)
    rng = np.random.default_rng(seed)
    pieces: dict[str, int] = {}

    def n_pieces(word: str) -> int:
        if word not in pieces:
            pieces[word] = encoder.tokenize([[word]], is_split_into_words=True).lengths[0] - 2
        return pieces[word]

    pairs = []
    among = np.arange(len(trees)) if among is None else np.sort(np.asarray(among, dtype=int))
    for index in rng.permutation(among):
        tree = trees[int(index)]
        if len(tree.words) > max_words:
            continue
        for dependent, (head, label) in enumerate(zip(tree.heads, tree.deprels, strict=True)):
            if label.split(":")[0] != deprel or head < 0 or tree.upos[dependent] not in dependent_upos \
                    or tree.upos[head] not in head_upos:
                continue
            edited, read = (head, dependent) if edited_role == "head" else (dependent, head)
            word = tree.words[edited]
            if not (word.isalpha() and word.islower()):
                continue
            options = [form for form, lemma in candidates.get((tree.upos[edited], tree.feats[edited]), [])
                       if lemma != tree.lemmas[edited] and form not in tree.words and n_pieces(form) == n_pieces(word)]
            if not options:
                continue
            second = list(tree.words)
            second[edited] = options[int(rng.integers(len(options)))]
            pairs.append(EditPair(int(index), edited, read, tuple(tree.words), tuple(second)))
            break
        if len(pairs) == limit:
            break
    return pairs


def word_vectors(trace: EncoderTrace, words: Sequence[int], states) -> torch.Tensor:
    """Each row's word ``words[b]`` as the mean of its pieces in ``states`` (rows, seq, d_model): (rows, d_model)."""
    rows = []
    for b, word in enumerate(words):
        units = word_units(trace.word_ids[b][: trace.lengths[b]])
        rows.append(states[b, list(units[word])].mean(dim=0))
    return torch.stack(rows)


def _closer_to_first(vectors: torch.Tensor, clean: torch.Tensor) -> np.ndarray:
    """``cos(v, clean first) - cos(v, clean second)`` per row; rows are the first inputs, then the second ones."""
    pairs = len(clean) // 2
    first, second = torch.cat([clean[:pairs]] * 2), torch.cat([clean[pairs:]] * 2)  # each (rows, d)
    cos = torch.nn.functional.cosine_similarity
    return (cos(vectors, first, dim=-1) - cos(vectors, second, dim=-1)).double().numpy()


def pair_readout(read_words: Sequence[int]):
    """The two readouts of a batch of pairs (first inputs, then second ones): (2, rows), word then sentence."""

    def readout(target: EncoderTrace, states) -> np.ndarray:
        clean_states = target.hidden_states[-1]
        states = clean_states if states is None else states
        words = _closer_to_first(word_vectors(target, read_words, states),
                                 word_vectors(target, read_words, clean_states))
        sentence = _closer_to_first(sentence_embeddings(states, target.real_tokens),
                                    sentence_embeddings(clean_states, target.real_tokens))
        return np.stack([words, sentence])  # (2, rows)

    return readout


def relation_patching(encoder: MiniLMEncoder, pairs: Sequence[EditPair], layers: Sequence[int], *,
                      chunk: int = 16) -> dict[str, PairPatching]:
    """Every head of ``layers`` patched between the two sentences of each pair: ``{"word": ..., "sentence": ...}``;
    the other layers' entries are NaN (4.1).

    Pairs are patched ``chunk`` at a time, in order of length (less padding); the result keeps the order of ``pairs``.
    """
    heads = [(layer, head) for layer in layers for head in range(encoder.config.n_heads)]
    lengths = encoder.tokenize([list(p.first) for p in pairs], is_split_into_words=True).lengths
    order = np.argsort(lengths, kind="stable")
    differences, carried = [], []
    for start in range(0, len(pairs), chunk):
        part = [pairs[i] for i in order[start:start + chunk]]
        difference, moved = patch_between_halves(encoder, [list(p.first) for p in part], [list(p.second) for p in part],
                                                 pair_readout([p.read for p in part] * 2), heads)
        differences.append(difference)  # (2, pairs)
        carried.append(moved)  # (pairs, layers, heads, 2)
    back = np.argsort(order, kind="stable")
    difference, moved = np.concatenate(differences, axis=1)[:, back], np.concatenate(carried)[back]
    ids = tuple(f"{p.tree}:{p.edited}" for p in pairs)
    return {name: PairPatching(ids, difference[k], moved[..., k]) for k, name in enumerate(("word", "sentence"))}


def sink_heads(encoder: MiniLMEncoder, sentences: Sequence[Sequence[str]], bar: float = SINK_BAR) -> list[list[int]]:
    """Heads whose word queries put at least ``bar`` of their weight on [CLS], averaged over ``sentences``."""
    totals = torch.zeros(encoder.config.n_layers, encoder.config.n_heads, dtype=torch.float64)
    for start in range(0, len(sentences), 32):
        trace = encoder.trace([list(s) for s in sentences[start:start + 32]], is_split_into_words=True)
        for b in range(len(trace.lengths)):
            n = trace.lengths[b]
            on_cls = trace.attention_weights[:, b, :, 1:n - 1, 0]  # (layers, heads, word queries)
            totals += on_cls.double().mean(-1)
    weight = (totals / len(sentences)).numpy()
    return [[int(layer), int(head), round(float(weight[layer, head]), 6)]
            for layer, head in zip(*np.nonzero(weight >= bar), strict=True)]


# ---------------------------------------------------------------- the tiny induction model


def induction_pairs(tokens: torch.Tensor, repeat_start: torch.Tensor, period: torch.Tensor, vocab_size: int,
                    edit: str = "value", seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Minimal pairs for induction: ``(corrupted, query, answer, replacement)`` (4.1).

    For each sequence ``[noise][A][A]`` (``tokens`` (batch, seq) inputs, with the second ``A`` starting at
    ``repeat_start`` and of length ``period``), the query is the middle of the predictable stretch of the second copy,
    ``q = repeat_start + (period - 2) // 2``; its induction answer is the token at ``k = q - period + 1`` of the first
    copy, the one after the earlier occurrence of the query's token. The corrupted sequence replaces one token by a
    token that occurs nowhere in the sequence (drawn with ``np.random.default_rng(seed)``): with ``edit="value"`` the
    answer at ``k``, so that induction at ``q`` now predicts the replacement (what the induction head copies changes);
    with ``edit="match"`` the earlier occurrence at ``k - 1``, so that the query's token has no earlier occurrence
    (what the previous-token head writes at ``k`` changes, and the induction head finds no match).
    """
    if edit not in ("value", "match"):
        raise ValueError(f"edit must be 'value' (replace the answer) or 'match' (replace the earlier occurrence of "
                         f"the query's token), got {edit!r}.")
    rng = np.random.default_rng(seed)
    batch = tokens.shape[0]
    query = repeat_start + (period - 2) // 2  # (batch,)
    key = query - period + 1  # (batch,): in the first copy
    answer = tokens[torch.arange(batch), key]
    replacement = torch.empty(batch, dtype=torch.long)
    for b in range(batch):
        unused = sorted(set(range(vocab_size)) - set(tokens[b].tolist()))
        replacement[b] = unused[int(rng.integers(len(unused)))]
    corrupted = tokens.clone()
    corrupted[torch.arange(batch), key if edit == "value" else key - 1] = replacement
    return corrupted, query, answer, replacement


def _tiny_run(model, tokens: torch.Tensor, patch: dict[int, torch.Tensor] | None = None,
              heads: Sequence[tuple[int, int]] = ()) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Logits of ``model`` on ``tokens`` with each ``(layer, head)`` of ``heads`` emitting ``patch[layer]``'s output
    for that head; also every layer's head outputs z (batch, heads, seq, d_head)."""
    outputs, hooks = [], []
    for layer, block in enumerate(model.blocks):
        chosen = [head for at, head in heads if at == layer]

        def pre_hook(module, args, kwargs, layer=layer, chosen=chosen):
            if chosen:
                def override(z):
                    z = z.clone()
                    z[:, chosen] = patch[layer][:, chosen]
                    return z
                kwargs = {**kwargs, "head_outputs_override": override}
            return args, kwargs

        def hook(module, args, kwargs, result):
            outputs.append(result.head_outputs)

        hooks.append(block.attention.register_forward_pre_hook(pre_hook, with_kwargs=True))
        hooks.append(block.attention.register_forward_hook(hook, with_kwargs=True))
    try:
        logits = model(tokens).logits
    finally:
        for handle in hooks:
            handle.remove()
    return logits, outputs


@torch.no_grad()
def tiny_head_patching(model, clean: torch.Tensor, corrupted: torch.Tensor, query: torch.Tensor, answer: torch.Tensor,
                       replacement: torch.Tensor, head_sets: dict[str, list[tuple[int, int]]],
                       readout: str = "logit difference") -> dict:
    """Patch each head (and each named set of heads together) between clean and corrupted sequences, both ways.

    Readout at ``query``: ``"logit difference"``, ``logit[answer] - logit[replacement]``, or ``"log-probability"``,
    the log-probability of ``answer``. Returns ``difference`` (pairs,), clean minus
    corrupted, and ``carried``: ``{label: (pairs,)}``, half of (the move of the corrupted run toward the clean one when
    the heads are patched from the clean run, plus that of the clean run toward the corrupted one), in the same units.
    """
    rows = torch.arange(len(query))

    def read(logits):
        at = logits[rows, query].double()  # (pairs, vocab)
        if readout == "log-probability":
            return torch.log_softmax(at, dim=-1)[rows, answer].numpy()
        return (at[rows, answer] - at[rows, replacement]).numpy()

    clean_logits, clean_z = _tiny_run(model, clean)
    corrupt_logits, corrupt_z = _tiny_run(model, corrupted)
    base_clean, base_corrupt = read(clean_logits), read(corrupt_logits)
    n_layers, n_heads = len(model.blocks), clean_z[0].shape[1]
    sets = {f"L{layer}H{head}": [(layer, head)] for layer in range(n_layers) for head in range(n_heads)}
    sets.update(head_sets)
    carried = {}
    for label, heads in sets.items():
        into_corrupt = read(_tiny_run(model, corrupted, dict(enumerate(clean_z)), heads)[0]) - base_corrupt
        into_clean = read(_tiny_run(model, clean, dict(enumerate(corrupt_z)), heads)[0]) - base_clean
        carried[label] = (into_corrupt - into_clean) / 2
    return {"difference": base_clean - base_corrupt, "carried": carried}


def tiny_model_patching(name: str = TINY_MODEL, size: int = TINY_PAIRS) -> dict:
    """:func:`tiny_head_patching` of the lab model ``name`` on ``size`` held-out sequences, JSON-ready (4.1)."""
    from mha.lab.checkpoints import load_checkpoint, load_json
    from mha.lab.induction import held_out_batch

    model, _ = load_checkpoint(name)
    model.eval()
    batch = held_out_batch(size=size)
    roles = load_json("induction_roles.json")["models"][name]
    previous = [(0, h) for h in roles["previous_token_heads_layer0"]]
    induction = [(1, h) for h in roles["induction_heads_layer1"]]
    sets = {"previous-token heads": previous, "induction heads": induction,
            "all heads": [(layer, head) for layer in range(model.config.n_layers)
                          for head in range(model.config.n_heads)]}
    edits = {}
    for edit, readout in (("value", "logit difference"), ("match", "log-probability")):
        corrupted, query, answer, replacement = induction_pairs(batch.inputs, batch.details["repeat_start"],
                                                                batch.details["period"], model.config.vocab_size, edit)
        result = tiny_head_patching(model, batch.inputs, corrupted, query, answer, replacement, sets, readout)
        edits[edit] = {"readout": readout, "difference": np.round(result["difference"], 6).tolist(),
                       "carried": {label: np.round(values, 6).tolist() for label, values in result["carried"].items()}}
    return {"model": name, "pairs": size, "previous_token_heads": previous, "induction_heads": induction,
            "prefix_matching": roles["prefix_matching"], "previous_token": roles["previous_token"], "edits": edits}


def main() -> int:
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    encoder = MiniLMEncoder.load()
    trees = read_ud_trees(EWT_DEV_PATH)
    selection, report = split_sentences(list(range(len(trees))), seed=0)
    selection_sentences = [trees[i].words for i in sorted(selection) if len(trees[i].words) <= MAX_WORDS]
    sinks = sink_heads(encoder, selection_sentences)
    print(f"sink heads: {sinks}", flush=True)
    relations = {}
    for relation in RELATIONS:
        layers = sorted({layer for (named, layer, _) in NAMED_HEADS if named == relation}
                        | ({layer for layer, _, _ in sinks} if relation == SINK_RELATION else set()))
        pairs = edit_pairs(encoder, trees, relation, among=report)  # patched on the report half only
        patched = relation_patching(encoder, pairs, layers)
        relations[relation] = {"pairs": [[p.tree, p.edited, p.read, " ".join(p.second)] for p in pairs],
                               **{name: result.to_dict(decimals=6, layers=layers) for name, result in patched.items()}}
        print(f"{relation}: {len(pairs)} pairs, layers {layers}", flush=True)
    content = {"model": "sentence-transformers/all-MiniLM-L6-v2", "treebank": "UD English-EWT dev (v2.15)",
               "split_seed": 0, "edit_seed": 0, "sink_bar": SINK_BAR,
               "readouts": {"word": "cos(x, x_first) - cos(x, x_second) of the read word's final vector",
                            "sentence": "the same for the sentence vector"},
               "named_heads": [[relation, layer, head, why] for (relation, layer, head), why in NAMED_HEADS.items()],
               "sink_heads": sinks, "sink_relation": SINK_RELATION,
               "relations": relations, "tiny": tiny_model_patching()}
    write_recorded_json(NAMED_HEAD_PATCHING_PATH, content)
    print(f"wrote {NAMED_HEAD_PATCHING_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
