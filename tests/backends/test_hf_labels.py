"""label_results: each row's label probabilities, remaining mass and top-k from its logits,
block by block (SOFTMAX_ROWS rows at a time): what one softmax over every row gives, and an
independent float64 softmax in numpy, to float64 rounding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lmaudit.backends.hf.labels import SOFTMAX_ROWS, label_results


class _Pieces:
    def decode(self, ids: list[int]) -> str:
        return f"<{ids[0]}>"


@pytest.mark.parametrize("n_rows", [1, SOFTMAX_ROWS, 2 * SOFTMAX_ROWS + 5])
@pytest.mark.parametrize("k", [0, 4])
def test_label_results_match_one_softmax_over_all_rows_and_numpy(n_rows: int, k: int) -> None:
    gen = torch.Generator().manual_seed(n_rows * 10 + k)
    vocab = 3001
    logits = torch.randn(n_rows, vocab, generator=gen) * 6.0
    rng = np.random.default_rng(n_rows)
    idx = [int(i) for i in rng.permutation(n_rows * 2)[:n_rows]]  # the rows' request indices
    label_ids: list[dict[str, int]] = [{} for _ in range(n_rows * 2)]
    for i in idx:
        a, b = rng.choice(vocab, size=2, replace=False)
        label_ids[i] = {"yes": int(a), "no": int(b)}

    got = list(label_results(logits, idx, label_ids, k, _Pieces()))

    assert [i for i, _ in got] == idx
    whole = torch.softmax(logits.double(), dim=-1)  # every row at once, as before blocks
    x = logits.double().numpy()
    ref = np.exp(x - x.max(axis=1, keepdims=True))
    ref /= ref.sum(axis=1, keepdims=True)
    for row, (i, res) in enumerate(got):
        assert res.label_token_ids == label_ids[i]
        for label, t in label_ids[i].items():
            assert res.probs[label] == pytest.approx(float(whole[row, t]), rel=1e-13, abs=1e-300)
            assert res.probs[label] == pytest.approx(ref[row, t], rel=1e-13, abs=1e-300)
        assert res.other == 1.0 - sum(res.probs.values())
        if k:
            order = np.argsort(-ref[row], kind="stable")[:k]
            assert [tok for tok, _ in res.top_k] == [f"<{t}>" for t in order]
            np.testing.assert_allclose([v for _, v in res.top_k], ref[row, order], rtol=1e-13)
        else:
            assert res.top_k == []
