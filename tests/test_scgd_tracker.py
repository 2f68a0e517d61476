"""SCGD's low-rank tracker (gpscale.train.weight_space.TrackedF) against the dense
recursion F̃ ← (1 − b)F̃ + b F̂ and the dense Cholesky terms, at small d in float64."""

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as hst

from gpscale.train import weight_space
from gpscale.train.weight_space import TrackedF, _dense_terms, batch_F, scgd_batch

D64 = torch.float64


def _run(d, s, steps, b, seed, n=500):
    g = torch.Generator().manual_seed(seed)
    Z = torch.randn(n, d, generator=g, dtype=D64)
    F0 = Z.mT @ Z + 0.3 * torch.eye(d, dtype=D64)
    tracked, dense = TrackedF(F0, b), F0.clone()
    for t in range(steps):
        phi = torch.randn(s, d, generator=g, dtype=D64) * (1 + t % 3)
        noise = 0.1 + 0.05 * t
        tracked.update(phi, noise, n)
        dense = (1 - b) * dense + b * (n / s) * batch_F(phi, torch.tensor(noise, dtype=D64), n)
    return tracked, dense, g


@settings(max_examples=25, deadline=None)
@given(d=hst.integers(2, 60), s=hst.integers(1, 6), steps=hst.integers(1, 40),
       b=hst.sampled_from([0.5, 0.9, 1.0]), seed=hst.integers(0, 10**6))
@example(d=33, s=1, steps=34, b=0.9, seed=1)
def test_tracker_follows_the_dense_recursion(d, s, steps, b, seed):
    """The held form equals the dense recursion (to the dropped weights, < 1e-13 of a
    new batch's), and its terms equal those of the dense F̃ to tight tolerance, in the
    low-rank regime (r < d, F̃_0 dropped) and before it."""
    tracked, dense, g = _run(d, s, steps, b, seed)
    scale = float(dense.abs().max())
    torch.testing.assert_close(tracked.matrix(), dense, rtol=1e-10, atol=1e-10 * scale)
    phi = torch.randn(3, d, generator=g, dtype=D64, requires_grad=True)
    got, want = tracked.terms(phi), _dense_terms(phi, dense)
    for a, w in zip(got, want):
        torch.testing.assert_close(a, w, rtol=1e-8, atol=1e-10)
    ga = torch.autograd.grad(got[0], phi)[0]
    # F̃ can be ill-conditioned (a ~ σ² against n/|S| ‖φ‖²): compare on gw's own scale.
    # Against the dense terms of the matrix the tracker holds (its Woodbury algebra) as
    # tightly as before; against the dense recursion's F̃ 10x looser, since the dropped
    # weights (1e-13 of a new batch's n/|S| ‖φ‖² ~ 1e5) move F̃ by ~1e-8 of σ² in
    # directions no kept batch spans (hypothesis: d = 33, |S| = 1, 34 steps, b = 0.9 at
    # 1.4e-9 of gw's largest entry)
    gh = torch.autograd.grad(_dense_terms(phi, tracked.matrix())[0], phi)[0]
    torch.testing.assert_close(ga, gh, rtol=1e-8, atol=1e-9 * float(gh.abs().max()))
    gw = torch.autograd.grad(_dense_terms(phi, dense)[0], phi)[0]
    torch.testing.assert_close(ga, gw, rtol=1e-8, atol=1e-8 * float(gw.abs().max()))


def test_tracker_reaches_its_low_rank_form():
    """With b = 0.9 F̃_0 and old batches drop after 13 steps: r = 13 |S| rows, fewer
    than d, and the Woodbury terms (not the dense ones) are used."""
    tracked, dense, g = _run(d=200, s=4, steps=30, b=0.9, seed=1)
    assert tracked.F0 is None and tracked.U.shape[0] == 13 * 4 < 200
    phi = torch.randn(4, 200, generator=g, dtype=D64)
    called = []
    original = weight_space._dense_terms
    try:
        weight_space._dense_terms = lambda *a: called.append(1) or original(*a)
        got = tracked.terms(phi)
    finally:
        weight_space._dense_terms = original
    assert not called
    for a, w in zip(got, _dense_terms(phi, dense)):
        torch.testing.assert_close(a, w, rtol=1e-9, atol=1e-9)


def test_scgd_batch_takes_the_tracker():
    tracked, dense, g = _run(d=30, s=5, steps=20, b=0.9, seed=2)
    phi = torch.randn(5, 30, generator=g, dtype=D64)
    y = torch.randn(5, generator=g, dtype=D64)
    w = torch.randn(30, generator=g, dtype=D64)
    noise = torch.tensor(0.2, dtype=D64, requires_grad=True)
    a, ea = scgd_batch(phi, y, 500, w, noise, tracked, return_estimate=True)
    b, eb = scgd_batch(phi, y, 500, w, noise, dense, return_estimate=True)
    torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-8)
    torch.testing.assert_close(ea, eb, rtol=1e-10, atol=1e-8)
    with pytest.raises(ValueError, match="b must"):
        TrackedF(dense, 0.0)


@pytest.mark.filterwarnings("ignore::gpscale.train.minibatch.FewStepsWarning")
def test_scgd_run_with_the_tracker_equals_the_dense_run(monkeypatch):
    """fit_scgd (b = 0.9) through TrackedF's low-rank terms and through the dense F̃
    end at the same hyperparameters (15 epochs of 10 batches, d = 40 features)."""
    from gpscale.features import RandomFourierFeatures
    from gpscale.train import stochastic

    g = torch.Generator().manual_seed(3)
    X = torch.randn(300, 2, generator=g, dtype=D64)
    y = torch.sin(2 * X[:, 0]) + 0.1 * torch.randn(300, generator=g, dtype=D64)

    def run():
        feats = RandomFourierFeatures(2, 40, seed=0)
        model, result = stochastic.fit_scgd(X, y, feats, batch_size=30, epochs=15,
                                            eval_every=10**9, seed=0)
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()]), result

    low, res = run()

    class Dense(TrackedF):
        def terms(self, phi):
            return _dense_terms(phi, self.matrix())

    monkeypatch.setattr(stochastic, "TrackedF", Dense)
    dense, _ = run()
    assert len(res.history) > 0
    torch.testing.assert_close(low, dense, rtol=1e-7, atol=1e-9)
    # the check has teeth: the run moved θ (here the noise) far from its start, 0.1
    assert abs(float(res.theta["noise"][0]) - 0.1) > 1e-3
