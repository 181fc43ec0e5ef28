"""Time mha's MiniLMEncoder against transformers' eager BertModel on the same inputs.

Both run on one thread, under torch.inference_mode, and both return every
layer's hidden states and every head's attention weights (transformers with
``attn_implementation="eager"``, ``output_attentions=True``,
``output_hidden_states=True``). Tokenisation is done once, outside the timing.
Prints median milliseconds per forward pass and the ratio ours / transformers
for one sentence and for a padded batch of 32 sentences. Goal: ratio <= 1.3.

    python -m scripts.bench_encoder [--repeats 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may be downloaded

import torch

torch.set_num_threads(1)  # the same thread count for both models

from transformers import BertModel  # noqa: E402
from transformers.utils import logging as transformers_logging  # noqa: E402

from mha.pretrained.encoder import MiniLMEncoder  # noqa: E402

SUBJECTS = ["The old fisherman", "A committee of unusually cautious economists", "She", "My neighbour's parrot",
            "The newly elected mayor of the small coastal town", "Nobody"]
VERBS = ["repaired", "argued about", "quietly photographed", "refused to sign", "sold", "remembered"]
OBJECTS = ["the boat.", "the proposal before lunch, which annoyed everyone.", "a photograph of the lighthouse at dawn.",
           "it!", "the paperwork, despite three separate reminders from the office.",
           "the antidisestablishmentarian pamphlet."]
ONE_SENTENCE = "The keys to the cabinet, which nobody had seen since Tuesday, were on the table."


def batch_of_sentences(size: int) -> list[str]:
    """``size`` sentences of varied length, built deterministically from the lists above."""
    return [f"{SUBJECTS[i % 6]} {VERBS[(i // 6) % 6]} {OBJECTS[(i * 5) % 6]}" for i in range(size)]


def median_ms(runs: dict[str, Callable[[], None]], repeats: int, warmup: int = 3) -> dict[str, float]:
    """Median milliseconds of each run; the runs take turns, so a busy moment on the machine hits all alike."""
    for run in runs.values():
        for _ in range(warmup):
            run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: 1000 * statistics.median(seconds) for name, seconds in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30, help="timed runs per case; the median is reported")
    args = parser.parse_args()

    transformers_logging.disable_progress_bar()
    ours = MiniLMEncoder.load()
    theirs = BertModel.from_pretrained(str(ours.model_path), attn_implementation="eager", local_files_only=True).eval()

    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, median of {args.repeats} runs\n")
    print(f"{'case':<38}{'ours (ms)':>11}{'transformers (ms)':>19}{'ratio':>8}")
    for case, text in (("1 sentence", ONE_SENTENCE), ("batch of 32 sentences", batch_of_sentences(32))):
        inputs = ours.tokenize(text)
        attention_mask = inputs.real_tokens.long()  # (batch, seq), 1 = real token

        def run_ours(inputs=inputs) -> None:
            with torch.inference_mode():
                ours(inputs)

        def run_theirs(inputs=inputs, attention_mask=attention_mask) -> None:
            with torch.inference_mode():
                theirs(input_ids=inputs.input_ids, attention_mask=attention_mask, token_type_ids=inputs.token_type_ids,
                       output_attentions=True, output_hidden_states=True)

        ms = median_ms({"ours": run_ours, "transformers": run_theirs}, args.repeats)
        label = f"{case}, ids {tuple(inputs.input_ids.shape)}"
        print(f"{label:<38}{ms['ours']:>11.2f}{ms['transformers']:>19.2f}{ms['ours'] / ms['transformers']:>8.2f}")


if __name__ == "__main__":
    main()
