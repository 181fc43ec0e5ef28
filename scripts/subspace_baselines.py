"""Each layer's heads against random subspaces as anisotropic as its input: data/subspace_baselines.json (chapter 2).

Run from the repository root:

    python -m scripts.subspace_baselines

Section 2.1 ("Each head's own subspace") compares the heads' subspaces with random ones. Uniformly random subspaces
ignore that the residual stream is anisotropic: the tokens vary far more along some directions than others, so a
head that read "at random, weighted by what is there" would lean towards those directions, and two such heads would
share more than two uniform ones. This script measures that baseline on real text:

1. 300 sentences of UD English-EWT dev (drawn with :func:`mha.corpora.treebank.split_sentences`, seed 0) go through
   all-MiniLM-L6-v2; for each layer, the covariance of its input (every real token, ``[CLS]`` and ``[SEP]``
   included, centred) is accumulated in float64.
2. For each layer and each of queries, keys and values, the real heads' mean pair overlap
   (:func:`mha.core.geometry.mean_pair_overlap`), their mean share of the variance
   (:func:`~mha.core.geometry.variance_in_subspace`) and the layer's coverage of the variance at several thresholds
   (:func:`~mha.core.geometry.variance_coverage`).
3. The same for ``N_SETS`` sets of 12 random heads drawn from that covariance
   (:func:`~mha.core.geometry.anisotropic_random_bases`) and ``N_SETS`` sets of uniformly random ones.

Every draw is stored (rounded to 5 decimals), so the notebook computes its own intervals. Precomputed because the
eigendecompositions of the draws take minutes on two cores. The file's sha256 is recorded in data/SHA256SUMS.
"""

from __future__ import annotations

import sys

import torch

from mha.core.geometry import (
    SUBSPACE_BASELINES_PATH,
    anisotropic_random_bases,
    mean_pair_overlap,
    variance_coverage,
    variance_in_subspace,
)
from mha.corpora.treebank import EWT_DEV_PATH, read_conllu, split_sentences
from mha.data_files import write_recorded_json
from mha.pretrained.encoder import MiniLMEncoder

N_SENTENCES = 300
N_SETS = 100
SEED = 0
MIN_HEADS = (0.05, 0.1, 0.25, 0.5)
BATCH = 32
DECIMALS = 5


def layer_input_covariances(encoder: MiniLMEncoder, sentences: list[list[str]]) -> tuple[torch.Tensor, int]:
    """(layers, d_model, d_model) centred covariance of each layer's input over all real tokens, and the count."""
    lengths = encoder.tokenize(sentences, is_split_into_words=True).real_tokens.sum(dim=1).tolist()
    order = sorted(range(len(sentences)), key=lambda i: lengths[i])  # similar lengths share a batch: little padding
    n_layers, d_model = encoder.config.n_layers, encoder.stacked_head_weights().W_Q.shape[-2]
    second = torch.zeros(n_layers, d_model, d_model, dtype=torch.float64)
    total = torch.zeros(n_layers, d_model, dtype=torch.float64)
    count = 0
    for start in range(0, len(order), BATCH):
        chunk = order[start:start + BATCH]
        trace = encoder.trace([sentences[i] for i in chunk], is_split_into_words=True)
        states = trace.hidden_states[:n_layers, trace.real_tokens].double()  # (layers, tokens, d_model): inputs
        second += torch.einsum("ltd,lte->lde", states, states)
        total += states.sum(dim=1)
        count += states.shape[1]
    mean = total / count  # (layers, d_model)
    return second / count - torch.einsum("ld,le->lde", mean, mean), count


def rounded(values: torch.Tensor) -> list:
    return torch.round(values, decimals=DECIMALS).tolist()


def summary(W: torch.Tensor, covariance: torch.Tensor) -> dict:
    """Overlap, variance share and coverage of one or more sets of heads W (..., heads, d_model, d_head)."""
    sets = W.reshape(-1, *W.shape[-3:])  # (sets, heads, d_model, d_head)
    overlap = torch.stack([mean_pair_overlap(one) for one in sets])  # (sets,)
    share = variance_in_subspace(sets, covariance).mean(dim=-1)  # (sets,): mean over heads
    coverage = variance_coverage(sets, covariance, MIN_HEADS)  # (sets, thresholds)
    return {"overlap": rounded(overlap), "variance_share": rounded(share), "coverage": rounded(coverage)}


def main() -> int:
    torch.set_num_threads(1)  # MKL's SVDs slow down badly when two threads compete with other work for 2 cores
    encoder = MiniLMEncoder.load()
    treebank = read_conllu(EWT_DEV_PATH)
    chosen = split_sentences(list(range(len(treebank))), 0.5, seed=SEED)[0][:N_SENTENCES]
    covariances, tokens = layer_input_covariances(encoder, [list(treebank[i].words) for i in chosen])
    stacked = encoder.stacked_head_weights()
    kinds = {"query": stacked.W_Q.double(), "key": stacked.W_K.double(), "value": stacked.W_V.double()}
    n_layers, n_heads, d_model, d_head = kinds["query"].shape
    generator = torch.Generator().manual_seed(SEED + 1)
    isotropic = torch.randn(N_SETS, n_heads, d_model, d_head, generator=generator, dtype=torch.float64)
    layers = []
    for layer in range(n_layers):
        covariance = covariances[layer]
        eigenvalues = torch.linalg.eigvalsh(covariance)
        anisotropic = anisotropic_random_bases(covariance, N_SETS, n_heads, d_head, seed=SEED + 10 + layer)
        layers.append({
            "layer": layer,
            "total_variance": round(float(eigenvalues.sum()), DECIMALS),
            "effective_dimensions": round(float(eigenvalues.sum() ** 2 / (eigenvalues ** 2).sum()), 2),
            "real": {kind: {key: value[0] for key, value in summary(W[layer], covariance).items()}
                     for kind, W in kinds.items()},
            "anisotropic": summary(anisotropic, covariance),
            "isotropic": summary(isotropic, covariance),
        })
        print(f"layer {layer}: done", flush=True)
    content = {"model": "sentence-transformers/all-MiniLM-L6-v2", "sentences": len(chosen), "tokens": tokens,
               "split_seed": SEED, "draw_seed": SEED, "sets": N_SETS, "min_heads": list(MIN_HEADS),
               "covariance": "centred, every real token ([CLS] and [SEP] included) of each layer's input",
               "layers": layers}
    write_recorded_json(SUBSPACE_BASELINES_PATH, content)  # and its sha256 in data/SHA256SUMS
    print(f"wrote {SUBSPACE_BASELINES_PATH}: {len(chosen)} sentences, {tokens} tokens, {N_SETS} sets per baseline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
