"""Synthetic tasks whose solutions are known, for watching heads specialise (sections 3.5 "Induction heads" to
3.7 "One big head or many").

Each task is a small frozen dataclass (its settings, serialisable with :meth:`to_dict`) with a ``sample(batch_size,
generator)`` method that returns a :class:`TaskBatch`: token ids ``inputs`` ``(batch, seq)``, the ``targets`` ``(batch,
seq)`` each position should predict, a boolean ``loss_mask`` ``(batch, seq)`` saying which positions are scored, and
task-specific ``details`` (where the repeat starts, where the answer sits, ...). Sampling is deterministic given a
``torch.Generator`` or an integer seed; nothing here touches torch's global RNG. Positions the loss mask leaves out have
target :data:`IGNORE_INDEX` (-100, the value ``torch.nn.functional.cross_entropy`` ignores by default).

The three tasks:

* :class:`InductionTask` - random tokens, then a stretch of them repeated. The repeat's period varies from sequence to
  sequence, and some periods are held out of training, so an induction claim can be checked on periods the model never
  saw (a single period could be solved by "look L tokens back").
* :class:`TwoRelationTask` - the answer combines the previous token with a value stored at an earlier position that
  matches a key: two relations at one position, which one attention distribution cannot pick out sharply at once.
* :class:`CopyBackTask` - predict the token ``distance`` places back: a purely positional task.
* :class:`PairRecallTask` - the controls of section 3.7 (and 1.2): the answer names the two tokens just before, drawn
  from one shared vocabulary (``typed=False``) or from two disjoint ones (``typed=True``), or only the previous token
  (``answer="second"``, a one-relation control).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple, Protocol

import torch
from torch import Tensor

from mha.core.argument_checks import check_whole_numbers
from mha.core.validation import InputError, check_flag, check_size, check_type, check_whole_number

__all__ = [
    "IGNORE_INDEX",
    "INDUCTION_TRAIN_PERIODS",
    "INDUCTION_HELD_OUT_PERIODS",
    "TaskBatch",
    "Task",
    "InductionTask",
    "TwoRelationTask",
    "CopyBackTask",
    "PairRecallTask",
    "masked_cross_entropy",
    "masked_accuracy",
    "task_from_dict",
    "as_generator",
]

IGNORE_INDEX = -100
"""Target value at positions that are not scored (what ``cross_entropy`` ignores by default)."""

INDUCTION_HELD_OUT_PERIODS: tuple[int, ...] = (7, 11, 14, 17, 19)
"""Repeat periods the default :class:`InductionTask` never trains on: the test of every induction claim."""

INDUCTION_TRAIN_PERIODS: tuple[int, ...] = tuple(p for p in range(4, 21) if p not in INDUCTION_HELD_OUT_PERIODS)
"""Repeat periods the default :class:`InductionTask` trains on: 4..20 minus the held-out ones."""


class TaskBatch(NamedTuple):
    """One batch of a task: what the model reads, what it should predict, and which predictions count."""

    inputs: Tensor  # (batch, seq) token ids
    targets: Tensor  # (batch, seq) token ids; IGNORE_INDEX where loss_mask is False
    loss_mask: Tensor  # (batch, seq) bool, True = this position is scored
    details: dict[str, Tensor]  # task-specific, documented by each task


class Task(Protocol):
    """What the trainer needs from a task."""

    name: str

    def sample(self, batch_size: int, generator: torch.Generator | int) -> TaskBatch: ...

    def metrics(self, logits: Tensor, batch: TaskBatch) -> dict[str, float]: ...

    def to_dict(self) -> dict: ...


def as_generator(generator: torch.Generator | int) -> torch.Generator:
    """A ``torch.Generator``: the one given, or a fresh one seeded with the integer given."""
    if isinstance(generator, torch.Generator):
        return generator
    seed = check_whole_number("generator", generator, meaning="an integer seed; or pass a torch.Generator")
    return torch.Generator().manual_seed(seed)


def _check_batch_size(batch_size: int, *row_widths: int) -> None:
    """``batch_size`` is a whole number >= 1, and ``batch_size`` rows of the widest of ``row_widths`` fit the limit."""
    check_whole_number("batch_size", batch_size, minimum=1)
    check_size("a batch of this task (batch_size, tokens per row)", (batch_size, max(row_widths, default=1)))


def _check_positive(task: object, *names: str) -> None:
    """Each field ``names`` of the (frozen) ``task`` is a whole number >= 1; stored as a plain ``int``."""
    for name in names:
        object.__setattr__(task, name, check_whole_number(name, getattr(task, name), minimum=1))


def _check_scored(logits: Tensor, targets: Tensor, loss_mask: Tensor) -> None:
    """Tensors (batch, seq, vocab), (batch, seq), (batch, seq) bool, with at least one position to score."""
    for name, value in (("logits", logits), ("targets", targets), ("loss_mask", loss_mask)):
        check_type(name, value, Tensor, "a tensor: logits (batch, seq, vocab), targets and loss_mask (batch, seq)")
    if logits.ndim != 3 or not logits.shape[:2] == targets.shape == loss_mask.shape or loss_mask.dtype != torch.bool:
        raise InputError(f"logits {tuple(logits.shape)}, targets {tuple(targets.shape)} and loss_mask "
                         f"{tuple(loss_mask.shape)} {loss_mask.dtype} should be (batch, seq, vocab), (batch, seq), "
                         "(batch, seq) bool.")
    if not bool(loss_mask.any()):
        raise InputError("loss_mask scores no position (it is False everywhere): a mean over no positions is no "
                         "number. Score at least one position, or leave this batch out.")


def masked_cross_entropy(logits: Tensor, targets: Tensor, loss_mask: Tensor) -> Tensor:
    """Mean cross-entropy (nats) over the positions where ``loss_mask`` is True.

    ``logits`` (batch, seq, vocab), ``targets`` (batch, seq), ``loss_mask``
    (batch, seq) bool -> a scalar tensor; an empty mask is refused. Chapter 3, "Induction heads".
    """
    _check_scored(logits, targets, loss_mask)
    return torch.nn.functional.cross_entropy(logits[loss_mask], targets[loss_mask])  # mean over scored positions


def masked_accuracy(logits: Tensor, targets: Tensor, loss_mask: Tensor) -> float:
    """Fraction of scored positions (``loss_mask`` True) where the top logit is the target.

    Shapes as in :func:`masked_cross_entropy` (an empty mask is refused); returns a float in [0, 1]. Chapter 3.
    """
    _check_scored(logits, targets, loss_mask)
    correct = logits.argmax(-1)[loss_mask] == targets[loss_mask]  # (n_scored,)
    return float(correct.float().mean())


def _random_tokens(batch_size: int, length: int, vocab_size: int, distinct: bool, generator: torch.Generator) -> Tensor:
    """(batch, length) random token ids; with ``distinct`` no id repeats within a row."""
    if distinct:
        return torch.rand(batch_size, vocab_size, generator=generator).argsort(dim=-1)[:, :length]  # (batch, length)
    return torch.randint(0, vocab_size, (batch_size, length), generator=generator)  # (batch, length)


@dataclasses.dataclass(frozen=True)
class InductionTask:
    """Random tokens, then the last ``period`` of them repeated, with ``period`` varied per sequence (chapter 3).

    Each sequence has ``seq_len + 1`` tokens laid out as ``[noise][A][A]``: a
    random block ``A`` of ``period`` tokens, repeated, at the end, and random
    noise before it; ``inputs`` are the first ``seq_len`` tokens and
    ``targets`` the last ``seq_len`` (next-token prediction). ``period`` is
    drawn uniformly from ``periods`` for each sequence, so the repeat starts at
    a different place and lies a different distance back every time: only
    "find the earlier copy of this token and predict what followed it"
    (induction) works for all of them. With ``distinct_tokens`` no token
    appears twice in ``[noise][A]``, so every token of the second ``A`` has
    exactly one earlier occurrence. :meth:`held_out` gives the same task with
    ``held_out_periods``, which training never sees.

    ``scored`` chooses the loss mask: ``"repeat"`` (default) scores only the
    positions induction can predict; ``"all"`` scores every position, as plain
    language modelling would. With distinct tokens, ``"all"`` teaches the
    opposite of copying at every noise position (the next noise token is never
    one already seen), which cancels the copying signal from the repeat: in
    our 3000-step runs of the 2-layer model such a model stayed at the
    uniform loss, log(vocab).

    ``details``: ``period`` (batch,); ``repeat_start`` (batch,), the input
    position where the second ``A`` begins; ``repeat_mask`` (batch, seq), the
    positions whose target induction can predict (the second ``A`` without
    its last token, which is only a target); and ``induction_key`` (batch,
    seq), the position an induction head should attend to from each query
    (the token after the earlier occurrence of the query's token), -1 outside
    the repeat.
    """

    vocab_size: int = 64
    seq_len: int = 40
    periods: tuple[int, ...] = INDUCTION_TRAIN_PERIODS
    held_out_periods: tuple[int, ...] = INDUCTION_HELD_OUT_PERIODS
    distinct_tokens: bool = True
    scored: str = "repeat"
    name: str = dataclasses.field(default="induction", init=False)

    def __post_init__(self) -> None:
        _check_positive(self, "vocab_size", "seq_len")
        for name in ("periods", "held_out_periods"):
            periods = check_whole_numbers(name, getattr(self, name), meaning="block lengths")
            object.__setattr__(self, name, tuple(periods))
        object.__setattr__(self, "distinct_tokens", check_flag("distinct_tokens", self.distinct_tokens))
        if not isinstance(self.scored, str) or self.scored not in ("repeat", "all"):
            raise ValueError(f"scored must be 'repeat' (score the predictable repeat) or 'all' (every position), "
                             f"got {self.scored!r}.")
        if not self.periods:
            raise ValueError("periods is empty; give at least one repeat period to draw from.")
        longest = (self.seq_len + 1) // 2
        for p in self.periods + self.held_out_periods:
            if not 2 <= p <= longest:
                raise ValueError(f"period {p} does not fit: two copies of a block of length p must fit in "
                                 f"seq_len + 1 = {self.seq_len + 1} tokens and p >= 2, so 2 <= p <= {longest}.")
        overlap = sorted(set(self.periods) & set(self.held_out_periods))
        if overlap:
            raise ValueError(f"periods {overlap} are both trained on and held out; held-out periods must be unseen.")
        if self.distinct_tokens and self.vocab_size < self.seq_len + 1 - min(self.periods + self.held_out_periods):
            raise ValueError(f"distinct_tokens needs vocab_size >= seq_len + 1 - shortest period = "
                             f"{self.seq_len + 1 - min(self.periods + self.held_out_periods)}, got {self.vocab_size}; "
                             f"raise vocab_size or pass distinct_tokens=False.")

    def held_out(self) -> InductionTask:
        """The same task drawing only from ``held_out_periods`` (never seen in training)."""
        if not self.held_out_periods:
            raise ValueError("this task has no held_out_periods; build it with some to check induction on unseen "
                             "periods.")
        return dataclasses.replace(self, periods=self.held_out_periods, held_out_periods=self.periods)

    def sample(self, batch_size: int, generator: torch.Generator | int) -> TaskBatch:
        """A batch of ``batch_size`` sequences; see the class docstring for the layout and ``details``."""
        _check_batch_size(batch_size, self.seq_len + 1, self.vocab_size if self.distinct_tokens else 1)
        generator = as_generator(generator)
        n_tokens = self.seq_len + 1
        choices = torch.tensor(self.periods)
        period = choices[torch.randint(0, len(choices), (batch_size,), generator=generator)]  # (batch,)
        # (batch, n_tokens)
        tokens = _random_tokens(batch_size, n_tokens, self.vocab_size, self.distinct_tokens, generator)
        positions = torch.arange(n_tokens)  # (n_tokens,)
        second_copy_start = n_tokens - period  # (batch,): token index where the repeat begins
        in_second_copy = positions[None, :] >= second_copy_start[:, None]  # (batch, n_tokens)
        # (batch, n_tokens)
        source = torch.where(in_second_copy, positions[None, :] - period[:, None], positions[None, :])
        tokens = tokens.gather(1, source)  # second copy := the block one period earlier
        inputs, targets = tokens[:, :-1], tokens[:, 1:]  # (batch, seq) each

        input_positions = torch.arange(self.seq_len)  # (seq,)
        repeat_mask = input_positions[None, :] >= second_copy_start[:, None]  # (batch, seq): target predictable
        induction_key = torch.where(repeat_mask, input_positions[None, :] - period[:, None] + 1,
                                    torch.full_like(repeat_mask, -1, dtype=torch.long))  # (batch, seq)
        details = {"period": period, "repeat_start": second_copy_start, "repeat_mask": repeat_mask,
                   "induction_key": induction_key}
        loss_mask = repeat_mask.clone() if self.scored == "repeat" else torch.ones_like(repeat_mask)  # (batch, seq)
        return TaskBatch(inputs, targets, loss_mask, details)

    def metrics(self, logits: Tensor, batch: TaskBatch) -> dict[str, float]:
        """``loss``/``accuracy`` on the scored positions; ``repeat_loss``/``repeat_accuracy`` on the predictable
        repeat."""
        repeat_mask = batch.details["repeat_mask"]
        return {
            "loss": float(masked_cross_entropy(logits, batch.targets, batch.loss_mask)),
            "accuracy": masked_accuracy(logits, batch.targets, batch.loss_mask),
            "repeat_loss": float(masked_cross_entropy(logits, batch.targets, repeat_mask)),
            "repeat_accuracy": masked_accuracy(logits, batch.targets, repeat_mask),
        }

    def to_dict(self) -> dict:
        """The settings as a JSON-ready dict (``task_from_dict`` inverts it)."""
        return {"name": self.name, "vocab_size": self.vocab_size, "seq_len": self.seq_len,
                "periods": list(self.periods),
                "held_out_periods": list(self.held_out_periods), "distinct_tokens": self.distinct_tokens,
                "scored": self.scored}


@dataclasses.dataclass(frozen=True)
class TwoRelationTask:
    """Look up a stored value by key AND read the previous token, at the same position (chapter 3).

    A sequence lists ``n_facts`` fact tokens, each standing for a pair (key
    ``k``, value ``v``) with distinct keys, then ``n_queries`` query pairs
    ``[modifier m][ask k]``. At each *ask* position the target is the answer
    token for ``(v, m)``: the value stored with key ``k`` earlier in the
    sequence (a content relation: attend to the fact whose key matches) and
    the modifier just before (a positional relation: attend to the previous
    token). One head can only serve both by splitting its attention between
    two places; two heads can each attend sharply to one. Only ask positions
    are scored (``loss_mask``).

    Token ids: facts ``0 .. K*V-1`` (fact ``(k, v)`` is ``k*V + v``), then ask
    tokens (``K`` of them), modifiers (``M``), and answers (``V*M``; answer
    ``(v, m)`` is ``first_answer + v*M + m``). ``details``: ``fact_position``
    (batch, seq) the position of the matching fact for each ask position, -1
    elsewhere.
    """

    n_keys: int = 8
    n_values: int = 8
    n_modifiers: int = 4
    n_facts: int = 8
    n_queries: int = 8
    name: str = dataclasses.field(default="two_relation", init=False)

    def __post_init__(self) -> None:
        _check_positive(self, "n_keys", "n_values", "n_modifiers", "n_facts", "n_queries")
        if self.n_facts > self.n_keys:
            raise ValueError(f"n_facts = {self.n_facts} facts need distinct keys, "
                             f"but there are only n_keys = {self.n_keys}.")

    @property
    def first_ask(self) -> int:
        """Token id of ``ask 0``."""
        return self.n_keys * self.n_values

    @property
    def first_modifier(self) -> int:
        """Token id of modifier 0."""
        return self.first_ask + self.n_keys

    @property
    def first_answer(self) -> int:
        """Token id of answer ``(v=0, m=0)``."""
        return self.first_modifier + self.n_modifiers

    @property
    def vocab_size(self) -> int:
        """Facts + ask tokens + modifiers + answers."""
        return self.first_answer + self.n_values * self.n_modifiers

    @property
    def seq_len(self) -> int:
        """``n_facts + 2 * n_queries`` positions."""
        return self.n_facts + 2 * self.n_queries

    def sample(self, batch_size: int, generator: torch.Generator | int) -> TaskBatch:
        """A batch of ``batch_size`` sequences; see the class docstring for the layout and ``details``."""
        _check_batch_size(batch_size, self.seq_len, self.n_keys)
        generator = as_generator(generator)
        F, Q = self.n_facts, self.n_queries
        keys = torch.rand(batch_size, self.n_keys, generator=generator).argsort(-1)[:, :F]  # (batch, facts) distinct
        values = torch.randint(0, self.n_values, (batch_size, F), generator=generator)  # (batch, facts)
        asked_fact = torch.randint(0, F, (batch_size, Q), generator=generator)  # (batch, queries): which fact
        modifiers = torch.randint(0, self.n_modifiers, (batch_size, Q), generator=generator)  # (batch, queries)

        fact_tokens = keys * self.n_values + values  # (batch, facts)
        ask_tokens = self.first_ask + keys.gather(1, asked_fact)  # (batch, queries)
        modifier_tokens = self.first_modifier + modifiers  # (batch, queries)
        answers = self.first_answer + values.gather(1, asked_fact) * self.n_modifiers + modifiers  # (batch, queries)
        query_pairs = torch.stack([modifier_tokens, ask_tokens], dim=-1).view(batch_size, 2 * Q)  # m, ask, m, ask, ...
        inputs = torch.cat([fact_tokens, query_pairs], dim=1)  # (batch, seq)

        ask_positions = F + 1 + 2 * torch.arange(Q)  # (queries,)
        targets = torch.full_like(inputs, IGNORE_INDEX)
        targets[:, ask_positions] = answers
        loss_mask = targets != IGNORE_INDEX  # (batch, seq)
        fact_position = torch.full_like(inputs, -1)
        fact_position[:, ask_positions] = asked_fact  # facts sit at positions 0..F-1
        return TaskBatch(inputs, targets, loss_mask, {"fact_position": fact_position})

    def metrics(self, logits: Tensor, batch: TaskBatch) -> dict[str, float]:
        """``loss`` and ``accuracy`` over the ask positions."""
        return {"loss": float(masked_cross_entropy(logits, batch.targets, batch.loss_mask)),
                "accuracy": masked_accuracy(logits, batch.targets, batch.loss_mask)}

    def to_dict(self) -> dict:
        """The settings as a JSON-ready dict (``task_from_dict`` inverts it)."""
        return {"name": self.name, "n_keys": self.n_keys, "n_values": self.n_values, "n_modifiers": self.n_modifiers,
                "n_facts": self.n_facts, "n_queries": self.n_queries}


@dataclasses.dataclass(frozen=True)
class CopyBackTask:
    """Predict the token ``distance`` places back: a purely positional task (chapter 3).

    Inputs are ``seq_len`` uniformly random tokens; the target at position
    ``i`` is the input at ``i - distance``, scored for ``i >= distance``. One
    head attending a fixed offset back solves it. ``details`` is empty.
    """

    vocab_size: int = 32
    seq_len: int = 24
    distance: int = 1
    name: str = dataclasses.field(default="copy_back", init=False)

    def __post_init__(self) -> None:
        _check_positive(self, "vocab_size", "seq_len", "distance")
        if self.distance >= self.seq_len:
            raise ValueError(f"distance = {self.distance} leaves nothing to score in seq_len = {self.seq_len}; "
                             f"use distance < seq_len.")

    def sample(self, batch_size: int, generator: torch.Generator | int) -> TaskBatch:
        """A batch of ``batch_size`` sequences; targets are the inputs shifted ``distance`` places right."""
        _check_batch_size(batch_size, self.seq_len)
        generator = as_generator(generator)
        inputs = torch.randint(0, self.vocab_size, (batch_size, self.seq_len), generator=generator)  # (batch, seq)
        targets = torch.full_like(inputs, IGNORE_INDEX)
        targets[:, self.distance:] = inputs[:, :-self.distance]  # target at i is the input at i - distance
        return TaskBatch(inputs, targets, targets != IGNORE_INDEX, {})

    def metrics(self, logits: Tensor, batch: TaskBatch) -> dict[str, float]:
        """``loss`` and ``accuracy`` over the scored positions."""
        return {"loss": float(masked_cross_entropy(logits, batch.targets, batch.loss_mask)),
                "accuracy": masked_accuracy(logits, batch.targets, batch.loss_mask)}

    def to_dict(self) -> dict:
        """The settings as a JSON-ready dict (``task_from_dict`` inverts it)."""
        return {"name": self.name, "vocab_size": self.vocab_size, "seq_len": self.seq_len, "distance": self.distance}


@dataclasses.dataclass(frozen=True)
class PairRecallTask:
    """Name the two tokens just before: the mechanism controls of "One big head or many" (chapter 3).

    A sequence holds ``n_triples`` triples ``[a][b][?]``, each preceded by a
    filler ``_`` or not (a coin flip per triple) and padded with fillers to
    ``4 * n_triples`` positions, so a triple starts anywhere and no absolute
    position says "this is an ``a``": a head must find ``a`` and ``b`` at the
    offsets -2 and -1 from the ``?``. At each ``?`` (the only scored positions)
    the target names ``(a, b)`` (``answer="pair"``: two relations) or ``b``
    alone (``answer="second"``: one relation, the control in which the head
    count should not matter). With ``typed=False`` both ``a`` and ``b`` are
    drawn from the same ``n_symbols`` tokens, so they reach the model through
    the same embeddings: a head that splits its weight between them adds two
    vectors in the same features. With ``typed=True`` ``a`` comes from tokens
    ``0..S-1`` and ``b`` from ``S..2S-1``, two types the model can keep in
    different features. Every variant has the same vocabulary: ``2S`` symbol
    tokens, ``?`` (``2S``), ``_`` (``2S + 1``) and ``S*S`` answer tokens from
    ``first_answer = 2S + 2`` (``(a, b)`` is ``first_answer + a*S + b``; ``b``
    alone is ``first_answer + b``).

    ``details``: ``first_position`` and ``second_position`` (batch, seq), the
    positions of ``a`` and ``b`` for each ``?`` position, -1 elsewhere.
    """

    n_symbols: int = 8
    n_triples: int = 6
    typed: bool = False
    answer: str = "pair"
    name: str = dataclasses.field(default="pair_recall", init=False)

    def __post_init__(self) -> None:
        _check_positive(self, "n_symbols", "n_triples")
        if self.answer not in ("pair", "second"):
            raise ValueError(f"answer must be 'pair' (name both tokens before '?') or 'second' (only the previous "
                             f"one), got {self.answer!r}.")
        if not isinstance(self.typed, bool):
            raise ValueError(f"typed must be True or False, got {self.typed!r}.")

    @property
    def query_token(self) -> int:
        """Token id of ``?``."""
        return 2 * self.n_symbols

    @property
    def filler_token(self) -> int:
        """Token id of the filler ``_``."""
        return 2 * self.n_symbols + 1

    @property
    def first_answer(self) -> int:
        """Token id of the first answer token."""
        return 2 * self.n_symbols + 2

    @property
    def vocab_size(self) -> int:
        """``2S`` symbols + ``?`` + ``_`` + ``S*S`` answers, the same for every variant."""
        return self.first_answer + self.n_symbols ** 2

    @property
    def seq_len(self) -> int:
        """``4 * n_triples`` positions (room for a filler before every triple)."""
        return 4 * self.n_triples

    def sample(self, batch_size: int, generator: torch.Generator | int) -> TaskBatch:
        """A batch of ``batch_size`` sequences; see the class docstring for the layout and ``details``."""
        _check_batch_size(batch_size, self.seq_len)
        generator = as_generator(generator)
        S, T = self.n_symbols, self.n_triples
        first = torch.randint(0, S, (batch_size, T), generator=generator)  # (batch, triples)
        second = torch.randint(0, S, (batch_size, T), generator=generator)  # (batch, triples)
        gaps = torch.randint(0, 2, (batch_size, T), generator=generator)  # (batch, triples): a filler before or not
        starts = 3 * torch.arange(T) + gaps.cumsum(dim=1)  # (batch, triples): position of each a
        inputs = torch.full((batch_size, self.seq_len), self.filler_token, dtype=torch.long)  # (batch, seq)
        inputs.scatter_(1, starts, first)
        inputs.scatter_(1, starts + 1, second + S if self.typed else second)  # typed: b has its own tokens
        inputs.scatter_(1, starts + 2, torch.full_like(first, self.query_token))
        answers = self.first_answer + (first * S + second if self.answer == "pair" else second)  # (batch, triples)
        targets = torch.full_like(inputs, IGNORE_INDEX).scatter_(1, starts + 2, answers)  # (batch, seq)
        first_position = torch.full_like(inputs, -1).scatter_(1, starts + 2, starts)
        second_position = torch.full_like(inputs, -1).scatter_(1, starts + 2, starts + 1)
        return TaskBatch(inputs, targets, targets != IGNORE_INDEX,
                         {"first_position": first_position, "second_position": second_position})

    def metrics(self, logits: Tensor, batch: TaskBatch) -> dict[str, float]:
        """``loss`` and ``accuracy`` over the ``?`` positions."""
        return {"loss": float(masked_cross_entropy(logits, batch.targets, batch.loss_mask)),
                "accuracy": masked_accuracy(logits, batch.targets, batch.loss_mask)}

    def to_dict(self) -> dict:
        """The settings as a JSON-ready dict (``task_from_dict`` inverts it)."""
        return {"name": self.name, "n_symbols": self.n_symbols, "n_triples": self.n_triples, "typed": self.typed,
                "answer": self.answer}

_TASKS = {"induction": InductionTask, "two_relation": TwoRelationTask, "copy_back": CopyBackTask,
          "pair_recall": PairRecallTask}


def task_from_dict(settings: dict) -> InductionTask | TwoRelationTask | CopyBackTask | PairRecallTask:
    """Rebuild a task from its :meth:`to_dict` output (as stored in a checkpoint manifest)."""
    settings = dict(check_type("settings", settings, dict, "a task's settings (a dict), as to_dict wrote them"))
    name = settings.pop("name", None)
    if name not in _TASKS:
        raise ValueError(f"unknown task name {name!r}; the tasks are {sorted(_TASKS)}.")
    for field in ("periods", "held_out_periods"):
        if field in settings:
            settings[field] = tuple(settings[field])
    return _TASKS[name](**settings)
