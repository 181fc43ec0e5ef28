"""Fit single heads of several widths to target patterns, for chapter 2 ("The low-rank bottleneck"), into data/.

Run from the repository root:

    python -m scripts.fit_head_patterns                  # writes data/pattern_fits.json (about a minute)
    python -m scripts.fit_head_patterns --seeds 0 1 2    # fewer seeds

The section fits one head's W_Q, W_K (d_model = 64, d_head from 1 to 32) over n = 16 fixed random token vectors
to four target patterns with :func:`mha.core.low_rank_fitting.fit_head_patterns` (Adam, 300 steps, best of 2 restarts),
once with free scores and once with scores capped at ±5, and repeats that for every seed. For every regime, seed,
target and width the file records the error (the share of attention misplaced) and the mean range of a row's
scores, rounded to 4 decimals, with the setup that produced them.

Why a file: the optimisation's path is chaotic. Perturbing the tokens by 1e-13 moves the fitted errors of heads of
width 1 or 2 by up to 0.1 (scores capped) or 0.01 (free scores), and another CPU's kernels (AVX2 against generic,
which round sums differently) do the same, so the numbers cannot be recomputed identically on every machine. The
notebook reads this one set of runs (:func:`mha.core.low_rank_fitting.load_pattern_fits`), and reports the best error
over the seeds, an upper bound on the best error a head of that width can reach, with the spread over seeds.
Everything runs on one thread; the same machine, torch version and thread count give the same file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from mha.core.low_rank_fitting import (
    REGENERATE_PATTERN_FITS,
    dense_random_pattern,
    first_token_pattern,
    fit_head_patterns,
    load_pattern_fits,
    permutation_pattern,
    previous_token_pattern,
)
from mha.data_files import record_sha256

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "data" / "pattern_fits.json"

N, D_MODEL, TOKEN_SEED = 16, 64, 0
STEPS, LR, RESTARTS = 300, 0.05, 2
WIDTHS = (1, 2, 4, 8, 12, 14, 15, 16, 32)
SEEDS = (0, 1, 2, 3, 4)
REGIMES = {"free scores": None, "scores capped at ±5": 5.0}  # regime -> score_cap
TARGET_RECIPES = {  # name -> how it is built, as the notebook builds it
    "first token": "first_token_pattern(n)",
    "previous token": "previous_token_pattern(n)",
    "random permutation": "permutation_pattern(n, seed=1)",
    "dense random": "dense_random_pattern(n, seed=2)",
}
DECIMALS = 4


def tokens() -> torch.Tensor:
    """(n, d_model) fixed random token vectors, float64, as in the notebook."""
    return torch.randn(N, D_MODEL, generator=torch.Generator().manual_seed(TOKEN_SEED), dtype=torch.float64)


def targets() -> torch.Tensor:
    """(targets, n, n), in the order of TARGET_RECIPES."""
    built = {"first token": first_token_pattern(N), "previous token": previous_token_pattern(N),
             "random permutation": permutation_pattern(N, seed=1), "dense random": dense_random_pattern(N, seed=2)}
    assert list(built) == list(TARGET_RECIPES)
    return torch.stack(list(built.values()))


def rounded(table: torch.Tensor) -> list:
    """A tensor as nested lists of floats with DECIMALS decimals (never -0.0)."""
    return [rounded(row) for row in table] if table.ndim else round(float(table), DECIMALS) + 0.0


def dumps(value, indent: int = 0) -> str:
    """JSON with every innermost list (one target's row over the widths) on one line, so that a diff reads well."""
    pad, inner = " " * indent, " " * (indent + 2)
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(key, ensure_ascii=False)}: {dumps(item, indent + 2)}"
                 for key, item in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and any(isinstance(item, (list, dict)) for item in value):
        return "[\n" + ",\n".join(inner + dumps(item, indent + 2) for item in value) + f"\n{pad}]"
    return json.dumps(value, ensure_ascii=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), help="default: 0 1 2 3 4")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="default: data/pattern_fits.json")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    x, goal = tokens(), targets()
    regimes = {}
    start = time.perf_counter()
    for regime, cap in REGIMES.items():
        errors, ranges = [], []
        for seed in args.seeds:
            fit = fit_head_patterns(x, goal, WIDTHS, steps=STEPS, lr=LR, restarts=RESTARTS, score_cap=cap, seed=seed)
            errors.append(rounded(fit.error))
            ranges.append(rounded(fit.score_range()))
            print(f"{regime:22s} seed {seed}: done ({time.perf_counter() - start:.0f} s)", flush=True)
        regimes[regime] = {"score_cap": cap, "error": errors, "score_range": ranges}

    data = {
        "format": 1,
        "description": ("Single heads fitted to target patterns (chapter 2, 'The low-rank bottleneck'): "
                        "error[seed][target][width] is the mean total-variation distance between the best "
                        "restart's pattern and the target; score_range the mean over queries of the largest minus "
                        "the smallest score in the row, for that restart."),
        "regenerate": REGENERATE_PATTERN_FITS,
        "generated_with": {"torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                           "threads": args.threads},
        "setup": {"n": N, "d_model": D_MODEL, "token_seed": TOKEN_SEED, "steps": STEPS, "lr": LR,
                  "restarts": RESTARTS},
        "targets": TARGET_RECIPES,
        "widths": list(WIDTHS),
        "seeds": list(args.seeds),
        "regimes": regimes,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(dumps(data) + "\n", encoding="utf-8")
    if args.output.resolve() == OUTPUT.resolve():
        record_sha256()  # data/SHA256SUMS: the loader checks the book's copy against it
    load_pattern_fits(args.output)  # the file must read back
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
