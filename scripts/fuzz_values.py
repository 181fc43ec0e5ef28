"""The wide fuzz's values: the bad ones it passes, and a plausible one for every other parameter of a call.

:data:`BAD_VALUES` holds each kind of bad value as the expression that builds a fresh one; :func:`good_value` reads a
parameter's annotation and returns what makes a plausible value for it (or :data:`NO_VALUE`), so that the bad value is
the only thing wrong with a call. ``scripts/fuzz_public_api.py`` runs the calls.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

BAD_VALUES: dict[str, str] = {
    "None": "None",
    "text": "'not a number'",
    "bool": "True",
    "nan": "float('nan')",
    "inf": "float('inf')",
    "complex": "complex(1, 2)",
    "empty list": "[]",
    "empty array": "np.array([])",
    "0-d array": "np.array(3.0)",
    "object array": "np.array([1, 'a', None], dtype=object)",
    "complex array": "np.ones((2, 3), dtype=complex)",
    "huge int": "10**12",
    "negative int": "-1",
    "ragged nested list": "[[1, 2], [3, [4]]]",
    "dict": "{'a': 1}",
}
"""Each kind of bad value, as the expression that builds a fresh one for every call (``np`` is numpy)."""

NO_VALUE = object()
"""What :func:`good_value` returns for an annotation that has no plausible value here."""

_CACHE: dict[str, object] = {}


def _cached(key: str, make):
    if key not in _CACHE:
        _CACHE[key] = make()
    return _CACHE[key]


def encoder():
    """The pretrained encoder, loaded once per process."""
    from mha.pretrained.encoder import MiniLMEncoder

    return _cached("encoder", MiniLMEncoder.load)


def _tiny_config():
    from mha.lab.tiny_model import TinyTransformerConfig

    return TinyTransformerConfig(vocab_size=8, max_seq_len=8, d_model=8, n_layers=1, n_heads=2)


def _tiny_model():
    from mha.lab.tiny_model import TinyTransformer

    return TinyTransformer(_tiny_config())


def _training():
    from mha.lab.training import TrainingConfig

    return TrainingConfig(steps=1, batch_size=2, log_every=1, eval_batch_size=2)


def _task():
    from mha.lab.tasks import InductionTask

    return InductionTask()


def _array():
    import numpy as np

    return np.random.default_rng(0).random((2, 4, 4))


def _tensor():
    import torch

    return torch.rand(2, 4, 4, generator=torch.Generator().manual_seed(0))


def _sentences():
    from mha.corpora.treebank import SAMPLE_TREEBANK_PATH, read_conllu

    return list(_cached("sentences", lambda: read_conllu(SAMPLE_TREEBANK_PATH)[:3]))


def _trees():
    from mha.corpora.treebank import SAMPLE_TREEBANK_PATH, read_ud_trees

    return list(_cached("trees", lambda: read_ud_trees(SAMPLE_TREEBANK_PATH, limit=3)))


def _agreement_items():
    from mha.corpora.agreement import agreement_items

    return list(_cached("agreement items", lambda: agreement_items(_trees())))


_OBJECTS = (("MiniLMEncoder", encoder), ("TracedEncoder", encoder),
            ("EncoderTrace", lambda: encoder().trace("the cat sat on the mat .")),
            ("TokenizedBatch", lambda: encoder().tokenize("the cat sat on the mat .")),
            ("TinyTransformerConfig", _tiny_config), ("TinyTransformer", _tiny_model), ("nn.Module", _tiny_model),
            ("TrainingConfig", _training), ("InductionTask", _task), ("Task", _task), ("Tensor", _tensor),
            ("ndarray", _array), ("ArrayLike", _array), ("Path", lambda: Path(tempfile.mkdtemp(dir="."))),
            ("Callable", lambda: lambda *args, **kwargs: None))
_CONTAINERS = ((("Sequence[AnnotatedSentence", "Iterable[AnnotatedSentence", "tuple[AnnotatedSentence"), _sentences),
               (("Sequence[UDTree]",), _trees), (("Sequence[AgreementItem]",), _agreement_items),
               (("Sequence[str]", "list[str]", "tuple[str", "Iterable[str]"), lambda: ["the", "cat", "sat"]),
               (("Sequence[Sequence[str]]", "list[list[str]]", "Iterable[Sequence[str]]"),
                lambda: [["the", "cat", "sat"], ["a", "dog"]]),
               (("tuple[tuple[str, ...], ...]",), lambda: (("the", "cat", "sat"), ("a", "dog"))),
               (("Sequence[tuple[int, int]]", "Iterable[tuple[int, int]]", "tuple[tuple[int, int], ...]"),
                lambda: [(0, 1)]),
               (("Sequence[int", "list[int", "tuple[int", "Sequence[float", "tuple[float", "Iterable[int"),
                lambda: [1, 2]),
               (("Sequence[bool]", "tuple[bool, ...]"), lambda: [True, False]),
               (("dict", "Mapping"), dict))
_SCALARS = {"bool": False, "int": 2, "float": 0.5, "str": "the cat sat", "int | None": 2, "float | None": 0.5,
            "str | None": "the cat sat"}
_FIRST_OF = {"AnnotatedSentence": _sentences, "UDTree": _trees, "AgreementItem": _agreement_items}


def good_value(parameter):
    """What makes a plausible value for ``parameter``, from its annotation (without one, a small float array);
    :data:`NO_VALUE` for a type that has none here."""
    annotation = parameter.annotation
    text = "" if annotation is parameter.empty else str(annotation)
    if not text:
        return _array
    if text in _FIRST_OF:
        return lambda: _FIRST_OF[text]()[0]
    for name, make in _OBJECTS:
        if name in text:
            return make
    for starts, make in _CONTAINERS:
        if text.startswith(starts):
            return make
    if text in _SCALARS:
        return lambda: _SCALARS[text]
    return NO_VALUE
