"""The interactive view of the lab's induction models (chapter 3, "Heads are not preassigned").

Pick a trained model (one per seed), a layer, a head and a held-out sequence
(a repeat period never seen in training), or type a sequence of token ids,
and see that head's attention map next to its scores: previous-token and
prefix-matching on this sequence and on the whole held-out batch, copying,
its role by :data:`mha.lab.induction.ROLE_SCORE_THRESHOLD`, and its K-composition
with the heads of the neighbouring layer. Rows attend *from*, columns are
attended *to*. Everything the view can show is computed when it is built, so
an update only runs one short sequence through the model and draws one map
(the book's budget is 50 ms). Typed sequences that are not token ids, fall
outside the vocabulary or do not fit the model get a message that says what
to change (any other error is shown as a message too), the last good map stays
on screen, and typed text is HTML-escaped before it is shown.
"""

from __future__ import annotations

import base64
import html
import re
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import torch
from ipywidgets import HTML, Dropdown, IntSlider, Layout, Text, Widget

from mha.book import head_label
from mha.core.validation import check_items, check_whole_number
from mha.lab.checkpoints import checkpoint_names, load_checkpoint
from mha.lab.circuit_scores import (
    composition_score_baseline,
    head_role_scores,
    k_composition_scores,
    prefix_matching_score,
    previous_token_score,
)
from mha.lab.induction import ROLE_SCORE_THRESHOLD, held_out_batch, role_labels
from mha.views.contract import ExplorerView
from mha.views.explorer import Explorer
from mha.views.heatmaps import AttentionMap

__all__ = ["TYPED_TOKEN_RULES", "induction_model_names", "parse_token_ids", "prefix_matching_keys",
           "InductionLabExplorer"]

_SEED_NAME = re.compile(r"^induction_2layer_seed(\d+)$")

TYPED_TOKEN_RULES = {
    "separators": r"[\s,]+", "token_id": "[0-9]+", "min_tokens": 2, "shorten": 24,
    "messages": {
        "not_id": "{piece} is not a token id: type whole numbers from 0 to {last} (digits 0-9) separated by spaces, "
                  "e.g. 5 17 42 8 5 17 42.",
        "outside": "token id {piece} is outside the vocabulary: the ids are 0 to {last}.",
        "too_few": "type at least {min_tokens} token ids (got {count}): a map needs two positions.",
        "too_many": "that is {count} tokens, but the model has positions for {max_len}; remove {extra}.",
    },
}
"""How typed token ids are read and what a bad one is told: :func:`parse_token_ids` here, and the website's view
(``views/typed_sequences.js``, which gets these in its payload), so that the two agree word for word. ``{piece}`` is
the offending piece, cut to ``shorten`` characters (in quotes, as Python's ``repr`` writes it, for ``not_id``)."""


def induction_model_names() -> list[str]:
    """The final 2-layer induction checkpoints in ``data/lab``, one per seed, in seed order."""
    found = [(int(match.group(1)), name) for name in checkpoint_names() if (match := _SEED_NAME.match(name))]
    return [name for _, name in sorted(found)]


def _shortened(piece: str, keep: int = TYPED_TOKEN_RULES["shorten"]) -> str:
    return piece if len(piece) <= keep else f"{piece[:keep]}..."


def parse_token_ids(text: str, vocab_size: int, max_len: int) -> list[int]:
    """Token ids typed as whole numbers separated by spaces or commas; ``ValueError`` saying what to fix.

    Ids must lie in ``0 .. vocab_size - 1`` and there must be 2 to
    ``max_len`` of them (a map needs two positions; the model has positional
    embeddings for ``max_len``).
    """
    if not isinstance(text, str):
        raise ValueError(f"type the tokens as text, got {type(text).__name__}.")
    vocab_size = check_whole_number("vocab_size", vocab_size, minimum=1, meaning="token ids the model knows")
    rules, messages = TYPED_TOKEN_RULES, TYPED_TOKEN_RULES["messages"]
    pieces = [piece for piece in re.split(rules["separators"], text.strip()) if piece]
    not_ids = [piece for piece in pieces if not re.fullmatch(rules["token_id"], piece)]
    if not_ids:
        raise ValueError(messages["not_id"].format(piece=repr(_shortened(not_ids[0])), last=vocab_size - 1))
    # a huge number is outside the vocabulary before it is converted (int() refuses over 4,300 digits)
    outside = [piece for piece in pieces if len(piece.lstrip("0")) > len(str(vocab_size)) or int(piece) >= vocab_size]
    if outside:
        raise ValueError(messages["outside"].format(piece=_shortened(outside[0]), last=vocab_size - 1))
    ids = [int(piece) for piece in pieces]
    if len(ids) < rules["min_tokens"]:
        raise ValueError(messages["too_few"].format(min_tokens=rules["min_tokens"], count=len(ids)))
    if len(ids) > max_len:
        raise ValueError(messages["too_many"].format(count=len(ids), max_len=max_len, extra=len(ids) - max_len))
    return ids


def prefix_matching_keys(tokens: Sequence[int]) -> list[tuple[int, int]]:
    """(query, key) pairs where key ``j + 1`` follows an earlier copy ``j < i`` of query ``i``'s token.

    These are the keys an induction head attends to (Olsson et al. 2022), the
    same ones :func:`mha.lab.circuit_scores.prefix_matching_score` scores.
    """
    tokens = check_items("tokens", tokens, "a list of token ids")
    tokens = list(tokens)
    return [(i, j + 1) for i in range(len(tokens)) for j in range(i) if tokens[j] == tokens[i]]


@lru_cache(maxsize=8)
def _baseline(d_model: int, d_head: int) -> float:
    return composition_score_baseline(d_model, d_head)


class _ModelView:
    """Everything the explorer shows about one model that does not depend on the chosen sequence."""

    def __init__(self, name: str, batch) -> None:
        self.model, self.info = load_checkpoint(name)
        n_layers = self.info.config.n_layers
        self.label = f"seed {self.info.seed}" + ("" if n_layers == 2 else f" ({n_layers}-layer model)")
        self.scores = head_role_scores(self.model, batch.inputs, batch.details["repeat_mask"])  # each (layers, heads)
        self.roles = role_labels(self.scores, ROLE_SCORE_THRESHOLD)  # layers x heads
        self.k_composition = [k_composition_scores(self.model, layer, layer + 1)
                              for layer in range(n_layers - 1)]  # each (heads of layer, heads of layer + 1)
        self.baseline = _baseline(self.info.config.d_model, self.info.config.d_head)


class InductionLabExplorer(Explorer):
    """Widgets to pick a seed, layer, head and held-out sequence of the lab's induction models, and see the head.

    ``names`` are checkpoint names (default: every 2-layer induction seed, :func:`induction_model_names`);
    ``n_sequences`` held-out sequences fill the sequence slider; typed token ids, when there are any, replace the
    held-out sequence. The rest is :class:`~mha.views.explorer.Explorer`'s (chapter 3, "Heads are not
    preassigned").
    """

    what_to_try = ("Find the previous-token head of each run without looking at the table; compare a run's "
                   "induction heads on a short period (7) and a long one (19); type a sequence with no repeat, "
                   "such as 5 17 42 8 9 3.")
    what_to_notice = ("Every run has the same roles, held by heads of different index. An induction head's weight "
                      "lands on the circles, the token after an earlier copy of the query's token; see where it "
                      "goes when nothing repeats.")

    site_note = ("Type token ids into the box and press Enter: the chosen model runs them in your page (trainer.js, "
                 "loaded the first time), from the same stored weights as the notebook's.")

    def __init__(self, names: Sequence[str] | None = None, *, n_sequences: int = 16, layer: int = 1, head: int = 0,
                 sequence: int = 0) -> None:
        layer, head, sequence = (check_whole_number(name, value, meaning="the slider starts there, or at its end")
                                 for name, value in (("layer", layer), ("head", head), ("sequence", sequence)))
        if names is not None:
            names = list(check_items("names", names, "a list of checkpoint names, e.g. ['induction_2layer_seed0']"))
        self.names_given = names
        names = induction_model_names() if names is None else list(names)
        if not names:
            raise ValueError("no induction checkpoints to show; pass checkpoint names or regenerate data/lab with "
                             "python -m scripts.train_checkpoints.")
        self.batch = held_out_batch()
        available = len(self.batch.inputs)
        self.n_sequences = n_sequences = check_whole_number(
            "n_sequences", n_sequences, minimum=1, maximum=available,
            meaning="how many held-out sequences the slider steps through")
        self.views = {name: _ModelView(name, self.batch) for name in names}
        first = self.views[names[0]]
        n_layers, n_heads = first.info.config.n_layers, first.info.config.n_heads
        self.model_menu = Dropdown(options=[(view.label, name) for name, view in self.views.items()], value=names[0],
                                   description="model")
        self.layer_slider = IntSlider(value=min(max(layer, 0), n_layers - 1), min=0, max=n_layers - 1,
                                      description="layer")
        self.head_slider = IntSlider(value=min(max(head, 0), n_heads - 1), min=0, max=n_heads - 1, description="head")
        self.sequence_slider = IntSlider(value=min(max(sequence, 0), n_sequences - 1), min=0, max=n_sequences - 1,
                                         description="held-out seq")
        self.own_tokens = Text(placeholder="or type token ids, e.g. 5 17 42 8 5 17 42, then press Enter",
                               continuous_update=False, description="your own", layout=Layout(width="95%"))
        self.typing_problem = HTML()
        self.drawn_typed = ""
        """The typed ids last drawn without a problem: what the payload shows (bad ids never reach it)."""
        self._runs: OrderedDict[tuple, tuple] = OrderedDict()
        super().__init__({"model": self.model_menu, "layer": self.layer_slider, "head": self.head_slider,
                          "sequence": self.sequence_slider, "typed": self.own_tokens})

    def _control_moved(self, name: str) -> None:
        ok = self.refresh()
        if name == "typed":
            self.typing_problem.value = "" if ok else self.message.value
            if ok:
                self.drawn_typed = self.own_tokens.value
                self.publish()

    def kernel_widgets(self) -> list[Widget]:
        """A box to type token ids: the view then shows them in place of the held-out sequences."""
        return [self.own_tokens, self.typing_problem]

    # -- what to show ----------------------------------------------------------------------------

    def _sequence(self, view: _ModelView, sequence: int, typed: str) -> tuple[torch.Tensor, torch.Tensor | None, str]:
        """Token ids (1, seq), the query mask for prefix matching (or None), and a description."""
        if typed.strip():
            config = view.info.config
            ids = parse_token_ids(typed, config.vocab_size, config.max_seq_len)
            return torch.tensor([ids]), None, f"your {len(ids)} tokens"
        period = int(self.batch.details["period"][sequence])
        start = int(self.batch.details["repeat_start"][sequence])
        description = f"held-out sequence {sequence}: period {period} (never trained on), repeat from position {start}"
        return (self.batch.inputs[sequence:sequence + 1], self.batch.details["repeat_mask"][sequence:sequence + 1],
                description)

    def _run(self, model: str, sequence: int, typed: str) -> tuple:
        """One model on one sequence: its tokens, their description and every layer's maps with this sequence's
        previous-token and prefix-matching scores (``None`` where no token repeats). The last runs are kept, so that
        the views of every layer and head of one sequence run the model once (the payload stores all of them)."""
        key = (model, "typed", typed) if typed.strip() else (model, "held out", sequence)
        if key in self._runs:
            self._runs.move_to_end(key)
            return self._runs[key]
        view = self.views[model]
        tokens, query_mask, description = self._sequence(view, sequence, typed)
        with torch.no_grad():
            maps = view.model(tokens).attention_weights  # each (1, heads, seq, seq)
        scores = []
        for weights in maps:
            try:
                prefix = prefix_matching_score(weights, tokens, query_mask)  # (heads,)
            except ValueError:
                prefix = None
            scores.append((previous_token_score(weights), prefix))
        self._runs[key] = tokens, description, maps, scores
        while len(self._runs) > self.n_sequences + 8:
            self._runs.popitem(last=False)
        return self._runs[key]

    def _composition_text(self, view: _ModelView, layer: int, head: int) -> str:
        parts = []
        if layer < len(view.k_composition):
            values = view.k_composition[layer][head]  # with the heads of layer + 1
            parts.append("its output read by the keys of "
                         + ", ".join(f"{head_label(layer + 1, h)} {v:.2f}" for h, v in enumerate(values.tolist())))
        if layer > 0:
            values = view.k_composition[layer - 1][:, head]  # with the heads of layer - 1
            parts.append("its keys read "
                         + ", ".join(f"{head_label(layer - 1, h)} {v:.2f}" for h, v in enumerate(values.tolist())))
        if not parts:
            return "K-composition: none (a one-layer model has nothing to compose with)."
        return f"K-composition (chance ≈ {view.baseline:.2f}): " + "; ".join(parts) + "."

    def view_data(self, *, model: str, layer: int, head: int, sequence: int, typed: str) -> ExplorerView:
        """Head ``head`` of ``layer`` (both clamped to the model) on a held-out sequence, or on ``typed`` token ids."""
        view = self.views[model]
        n_layers, n_heads = view.info.config.n_layers, view.info.config.n_heads
        layer = min(check_whole_number("layer", layer, minimum=0, meaning="layers are counted from 0"), n_layers - 1)
        head = min(check_whole_number("head", head, minimum=0, meaning="heads are counted from 0"), n_heads - 1)
        tokens, description, maps, here_scores = self._run(model, sequence, typed)
        weights, (previous, prefix) = maps[layer], here_scores[layer]  # (1, heads, seq, seq); each score (heads,)
        here_previous = float(previous[head])
        here_prefix = "undefined (no token repeats)" if prefix is None else f"{float(prefix[head]):.2f}"
        scores = {key: float(value[layer, head]) for key, value in view.scores.items()}  # on the held-out batch
        role = view.roles[layer][head]
        message = (
            f"<b>{html.escape(view.label)}, {head_label(layer, head)}</b>: role by score "
            f"(threshold {ROLE_SCORE_THRESHOLD}): <b>{html.escape(role)}</b>.<br>"
            f"On {html.escape(description)}: previous-token {here_previous:.2f}, prefix-matching {here_prefix}.<br>"
            f"On all {len(self.batch.inputs)} held-out sequences: previous-token {scores['previous_token']:.2f}, "
            f"prefix-matching {scores['prefix_matching']:.2f}; copying {scores['copying']:.2f}.<br>"
            f"{html.escape(self._composition_text(view, layer, head))}<br>"
            f"Circles mark the keys an induction head attends to: the token after an earlier copy of the query's "
            f"token. Tokens: <code>{' '.join(str(t) for t in tokens[0].tolist())}</code>"
        )
        positions = [str(position) for position in range(tokens.shape[1])]
        attention_map = AttentionMap(weights[0, head].numpy(), positions,
                                     title=f"{view.label}, {head_label(layer, head)} ({role})",
                                     marked=prefix_matching_keys(tokens[0].tolist()))
        return ExplorerView(message, attention_map, slider_max={"layer": n_layers - 1, "head": n_heads - 1},
                            shown={"layer": layer, "head": head})

    def _state(self) -> dict[str, object]:
        return {"model": self.model_menu.value, "layer": self.layer_slider.value, "head": self.head_slider.value,
                "sequence": self.sequence_slider.value}

    def recipe_arguments(self) -> dict:
        return {"names": self.names_given, "n_sequences": self.n_sequences, "layer": self.layer_slider.value,
                "head": self.head_slider.value, "sequence": self.sequence_slider.value}

    def page_sequences(self) -> dict | None:
        """What the website's view needs to run typed token ids through each model in the reader's page
        (``views/typed_sequences.js``, with trainer.js's ``modelFromWeights`` and ``forward``): the rules of
        :data:`TYPED_TOKEN_RULES`, and per model of the menu (in its order) the config and every parameter, float32
        little-endian in ``named_parameters`` order, base64 (16-bit floats would move attention weights by up to
        7e-3). The parameters no attention weight depends on (the unembedding, the last layer's values and output)
        are not sent: ``layout`` lists every parameter as [name, shape, sent], and the page sets the others to 0.
        None when a model has parts trainer.js does not run (an MLP, LayerNorm, no biases, not causal)."""
        models = []
        for view in self.views.values():
            config = view.info.config
            if config.use_mlp or config.layer_norm or not config.attention_bias or not config.causal:
                return None
            last = f"blocks.{config.n_layers - 1}.attention."
            unsent = {"W_U", *(last + part for part in ("W_V", "b_V", "W_O", "b_O"))}
            named = list(view.model.named_parameters())
            values = np.concatenate([parameter.detach().numpy().astype("<f4").ravel() for name, parameter in named
                                     if name not in unsent])
            models.append({"config": {key: getattr(config, key) for key in
                                      ("vocab_size", "max_seq_len", "d_model", "n_layers", "n_heads")},
                           "layout": [[name, list(parameter.shape), name not in unsent] for name, parameter in named],
                           "weights": base64.b64encode(values.tobytes()).decode("ascii")})
        return {"rules": TYPED_TOKEN_RULES, "models": models}

    def site_arguments(self, values: dict[str, object]) -> dict[str, object]:
        return {**values, "typed": self.drawn_typed}  # typed ids, in a kernel; the site shows the held-out ones
