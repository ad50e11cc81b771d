"""The codebook's tie handling: canonical labels, the tie-broken mutual reachability (HDBSCAN's,
every value distinct, every order kept), and the same codebook under NumPy's other sorting
kernels, where HDBSCAN run on the plain distances gives other labels."""

from __future__ import annotations

import numpy as np
import pytest

from lmaudit.studies.choir.codebook import _distances
from lmaudit.studies.choir.ties import FLOOR, canonical_labels, tie_broken_reachability
from simd_kernels import narrower_numpy, run_python


def test_canonical_labels_number_by_first_appearance():
    assert canonical_labels(np.array([5, 5, -1, 2, 5, 2, 0])).tolist() == [0, 0, -1, 1, 0, 1, 2]
    assert canonical_labels(np.array([-1, -1])).tolist() == [-1, -1]
    assert canonical_labels(np.array([], dtype=np.int64)).tolist() == []


def _hdbscan_reachability(d: np.ndarray, k: int) -> np.ndarray:
    """HDBSCAN's definition, written out as the hdbscan package computes it."""
    k = min(k, d.shape[0] - 1)
    core = np.partition(d, k, axis=0)[k]
    return np.maximum(np.maximum(d, core[None, :]), core[:, None])


def _ties(seed: int) -> np.ndarray:
    """Bag-of-words-like unit vectors (0/1 coordinates): distances tie all the time; and copies."""
    rng = np.random.default_rng(seed)
    x = (rng.random((40, 12)) < 0.3).astype(np.float64)
    x[x.sum(axis=1) == 0, 0] = 1.0
    x = np.concatenate([x, x[:6]])  # six texts written twice: distance 0
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("k", [1, 3, 5])
def test_tie_broken_reachability_is_hdbscans_with_every_value_distinct(k):
    d = _distances(_ties(k), "cosine")
    m = np.maximum(_hdbscan_reachability(d, k), FLOOR)
    got = tie_broken_reachability(d, k)
    iu = np.triu_indices(d.shape[0], 1)
    want, vals = m[iu], got[iu]
    assert len(set(want.tolist())) < want.size / 4  # the input ties a lot
    assert np.unique(vals).size == vals.size  # the output never does
    assert np.array_equal(got, got.T) and not got.diagonal().any()
    unit = np.spacing(want.astype(np.float32)).astype(np.float64)
    assert np.all(vals >= want) and np.all(vals < want + unit)  # less than a float32 unit added
    # every order of distinct values kept; equal values ordered by distance, then by pair
    order = np.argsort(vals)
    assert np.array_equal(order, np.lexsort((np.arange(vals.size), d[iu], want)))


def test_min_samples_one_makes_hdbscans_reachability_the_matrix_itself():
    """What the codebook relies on: with min_samples=1 HDBSCAN's own mutual reachability of the
    tie-broken matrix is that matrix (each core distance is the column's smallest entry)."""
    got = tie_broken_reachability(_distances(_ties(7), "cosine"), 5)
    again = _hdbscan_reachability(got, 1)
    off = ~np.eye(got.shape[0], dtype=bool)
    assert np.array_equal(again[off], got[off])


def test_reachability_refuses_unrounded_distances():
    with pytest.raises(ValueError, match="float32"):
        tie_broken_reachability(np.array([[0.0, 0.1], [0.1, 0.0]]), 1)


_CODEBOOK = """
import hashlib, json
import numpy as np
from hdbscan import HDBSCAN
from lmaudit.backends.sim.embed import SimEmbedder
from lmaudit.studies.choir.codebook import _distances, build_codebook
rng = np.random.default_rng(1)
words = [f"w{i}" for i in range(30)]
texts = []
for k in range(6):  # six topics of three words, with a filler word and sometimes a stray one
    for _ in range(80):
        t = [str(rng.choice(["the", "a", "key", "main"]))] + words[3 * k: 3 * k + int(rng.integers(2, 4))]
        if rng.random() < 0.3:
            t.append(str(rng.choice(words[18:])))
        texts.append(" ".join(t))
x = SimEmbedder(dim=64).embed(texts)
plain = HDBSCAN(min_cluster_size=5, cluster_selection_epsilon=0.3, metric="precomputed").fit_predict(
    _distances(x, "cosine")
)
cb = build_codebook(texts, x, min_cluster_size=5, epsilon=0.3)
ours = json.dumps([cb.concept_of, cb.labels, cb.sizes, sorted(cb.clustered)], sort_keys=True)
print(hashlib.sha256(ours.encode()).hexdigest(), hashlib.sha256(plain.tobytes()).hexdigest())
"""


def test_codebook_is_the_same_under_numpys_other_sorting_kernels():
    """HDBSCAN orders equal spanning-tree edges by NumPy's unstable sort, whose AVX-512 and
    AVX2 kernels leave them in other orders: on these bag-of-words texts its labels differ
    between the kernels (the choir_sim run's codebooks did, between hosts). The codebook
    breaks every tie first, so it is the same."""
    env = narrower_numpy()
    if env is None:
        pytest.skip("NumPy found no SIMD level beyond its baseline here")
    (ours_a, plain_a), (ours_b, plain_b) = (run_python(_CODEBOOK, e).split() for e in (None, env))
    assert ours_a == ours_b
    if plain_a == plain_b:
        pytest.skip("plain HDBSCAN gives the same labels under both kernels on this machine")
