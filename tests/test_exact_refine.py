"""θ of the iterative exact GP on every row (gpscale.train.exact_refine): the
stochastic NLML gradient against the dense one, the contraction pass against autograd,
and a refinement that lowers the exact NLML."""

import math

import pytest
import torch
from refine_checks import assert_unbiased_gradient, cg_model

import gpscale
from gpscale.kernels import RBF, Matern, Scale
from gpscale.kernels.chunked import kernel_contraction
from gpscale.methods.exact import fit_exact
from gpscale.models import ConjugateGradients, ExactGP
from gpscale.train.exact_refine import refine_on_rows
from gpscale.train.warning_types import ConvergenceWarning


def _data(n=300, d=3, noise=0.1, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    y = torch.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + noise * torch.randn(
        n, generator=g, dtype=torch.float64)
    return X.to(device), y.to(device)


def _flat(grads, model):
    return torch.cat([grads[p].reshape(-1) for p in model.parameters() if p.requires_grad])


@pytest.mark.parametrize("kernel", ["rbf", "matern32"])
def test_contraction_matches_autograd(device, kernel):
    """⟨A Bᵀ, K⟩'s gradient by row-block vjp equals autograd through the dense K."""
    X, _ = _data(n=70, device=device)
    base = RBF(torch.tensor([0.7, 1.1, 1.9]), ard_dims=3) if kernel == "rbf" else \
        Matern(1.5, torch.tensor([0.7, 1.1, 1.9]), ard_dims=3)
    k = Scale(base, outputscale=1.7).to(dtype=torch.float64, device=device)
    g = torch.Generator().manual_seed(1)
    A = torch.randn(70, 4, generator=g, dtype=torch.float64).to(device)
    B = torch.randn(70, 4, generator=g, dtype=torch.float64).to(device)
    got = kernel_contraction(k, X, X, A, B, block=16)
    params = [p for p in k.parameters() if p.requires_grad]
    want = torch.autograd.grad((k(X, X) * (A @ B.mT)).sum(), params)
    for p, w in zip(params, want):
        torch.testing.assert_close(got[p], w, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kernel", ["rbf", "rbf-iso", "matern32"])
@pytest.mark.parametrize("block_dtype", [torch.float64, torch.float32])
def test_operator_contraction_matches_autograd(device, kernel, block_dtype):
    """The operator's contraction (tiled for an RBF under Scale wrappers, ``kernel.vjp``
    slabs otherwise) equals autograd through the dense K: to 1e-10 with float64 tiles,
    to 1e-4 of the largest gradient with float32 tiles."""
    from gpscale.kernels.operator import KernelOperator

    X, _ = _data(n=90, device=device)
    ls = torch.tensor([0.7, 1.1, 1.9])
    base = {"rbf": lambda: RBF(ls, ard_dims=3), "rbf-iso": lambda: RBF(0.9),
            "matern32": lambda: Matern(1.5, ls, ard_dims=3)}[kernel]()
    k = Scale(Scale(base, outputscale=1.7), outputscale=0.6).to(dtype=torch.float64,
                                                                 device=device)
    g = torch.Generator().manual_seed(2)
    A = torch.randn(90, 5, generator=g, dtype=torch.float64).to(device)
    B = torch.randn(90, 5, generator=g, dtype=torch.float64).to(device)
    got = KernelOperator(k, X, 0.05, block=32, block_dtype=block_dtype).contraction(A, B)
    params = [p for p in k.parameters() if p.requires_grad]
    want = torch.autograd.grad((k(X, X) * (A @ B.mT)).sum(), params)
    assert len(got) == len(want) == 3
    scale = max(float(w.abs().max()) for w in want)
    tol = 1e-10 if block_dtype == torch.float64 or kernel == "matern32" else 1e-4
    for a, w in zip(got, want):
        torch.testing.assert_close(a, w, rtol=tol, atol=tol * scale)


def test_stochastic_gradient_is_unbiased(device):
    """The mean of independent estimates (preconditioned probes) lies within four
    standard errors of the dense NLML gradient in every parameter; the data-fit-only
    parameter (the constant mean) is exact."""
    X, y = _data(device=device)
    k = Scale(RBF(torch.tensor([0.8, 1.3, 2.0]), ard_dims=3))
    exact = ExactGP(k, X, y, noise=0.05, mean="constant", device=device)
    with torch.no_grad():
        exact.mean_constant.fill_(0.2)
    params = [p for p in exact.parameters() if p.requires_grad]
    want = torch.cat([g.reshape(-1) for g in torch.autograd.grad(exact.nlml(), params)])
    model = cg_model(exact, solve=False, tol=1e-10, block_dtype="float64",
                                        precond_rank=20)
    assert_unbiased_gradient(model, want)


def test_refinement_lowers_the_exact_nlml():
    """From hyperparameters far from the optimum (noise 10x too large, lengthscales
    off), Adam steps on the stochastic gradient lower the dense NLML and approach the
    Cholesky ML-II fit."""
    X, y = _data(n=300, noise=0.1, seed=3)
    start = Scale(RBF(torch.tensor([2.0, 2.0, 2.0]), ard_dims=3))
    model = ExactGP(start, X, y, noise=0.5,
                    solver=ConjugateGradients(block_dtype="float64", tol=1e-4))
    before = float(model.objective().detach())
    result = refine_on_rows(model, 25, probes=16, seed=0)
    after = float(model.objective().detach())
    ref, _ = fit_exact(X, y, Scale(RBF(torch.ones(3), ard_dims=3)), solver="cholesky")
    best = float(ref.nlml().detach())
    assert len(result.history) > 5 and result.history[0]["phase"] == "refine"
    assert after < before - 0.5 * (before - best)  # more than half the way to the optimum
    gap = lambda noise: abs(math.log(noise / float(ref.noise)))  # noqa: E731
    assert gap(float(model.noise)) < 0.5 * gap(0.5)


class _Clock:
    """A fake ``time`` module whose clock moves ``step`` seconds at every reading."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def perf_counter(self) -> float:
        self.now += self.step
        return self.now


def test_the_refinement_keeps_its_time_allowance(monkeypatch):
    """With a clock that runs 50 s per reading, a refinement allowed 200 s starts no
    evaluation past it: it ends early, at an accepted step, and says why; fit_exact's
    refine="auto" plans with that allowance and warns when it is cut short."""
    import gpscale.train.exact_refine as exact_refine

    X, y = _data(n=300, noise=0.1, seed=3)
    start = Scale(RBF(torch.tensor([2.0, 2.0, 2.0]), ard_dims=3))
    model = ExactGP(start, X, y, noise=0.5,
                    solver=ConjugateGradients(block_dtype="float64", tol=1e-4))
    monkeypatch.setattr(exact_refine, "time", _Clock(50.0))
    result = refine_on_rows(model, 25, probes=8, seed=0, time_limit=200.0)
    assert 1 <= result.n_evals < 25 and result.reason == "time allowance of 200 s"
    assert not result.converged
    assert torch.isfinite(model.noise) and model.solver.alpha.abs().sum() > 0
    unlimited = refine_on_rows(model, 3, probes=8, seed=0)  # no allowance: every step
    assert unlimited.n_evals == 3


def test_an_evaluation_still_solving_at_the_allowance_is_abandoned(monkeypatch):
    """Every kernel product takes 1 s of a fake clock and CG is asked for a tight
    tolerance, so one evaluation outlasts the allowance: it is abandoned there (not run
    to its end, as near a small noise one step can need hundreds of iterations), and θ
    is the last accepted step's."""
    import gpscale.models.exact_cg as exact_cg
    import gpscale.train.exact_refine as exact_refine

    clock = _Clock(0.0)
    real_cg = exact_cg.cg

    def timed_cg(matmul, *args, **kwargs):
        def product(v):
            clock.now += 1.0
            return matmul(v)
        return real_cg(product, *args, **kwargs)

    X, y = _data(n=300, noise=0.01, seed=3)
    model = ExactGP(Scale(RBF(torch.tensor([2.0, 2.0, 2.0]), ard_dims=3)), X, y,
                    noise=0.5, solver=ConjugateGradients(block_dtype="float64", tol=1e-10,
                                                         precond_rank=0))
    start = [p.detach().clone() for p in model.parameters()]
    monkeypatch.setattr(exact_cg, "cg", timed_cg)
    monkeypatch.setattr(exact_refine, "time", clock)

    def from_start():  # θ and the clock back where they began
        for p, p0 in zip(model.parameters(), start):
            p.data.copy_(p0)
        clock.now = 0.0

    free = refine_on_rows(model, 1, probes=8, seed=0)  # one evaluation, no allowance
    assert free.n_evals == 1 and clock.now > 20
    each = clock.now
    from_start()
    cut = refine_on_rows(model, 25, probes=8, seed=0, time_limit=0.5 * each)
    assert clock.now <= 0.5 * each + 1  # at most the product under way at the limit
    assert cut.n_evals == 0 and cut.reason == f"time allowance of {0.5 * each:g} s"
    for p, p0 in zip(model.parameters(), start):  # the start: no step was accepted
        torch.testing.assert_close(p.detach(), p0, rtol=1e-12, atol=1e-12)
    from_start()  # with a grace of 0.3 of a step: abandoned that much later
    graced = refine_on_rows(model, 25, probes=8, seed=0, time_limit=0.5 * each,
                            grace=0.3 * each)
    assert 0.8 * each <= clock.now <= 0.8 * each + 1 and graced.n_evals == 0
    from_start()
    later = refine_on_rows(model, 25, probes=8, seed=0, time_limit=2.5 * each)
    assert clock.now <= 2.5 * each + 1 and 1 <= later.n_evals < 25
    assert later.reason.startswith("time allowance") and torch.isfinite(model.noise)
    from_start()  # every evaluation asked for ran, the last ending in its grace
    spent = refine_on_rows(model, 1, probes=8, seed=0, time_limit=0.8 * each,
                           grace=0.5 * each)
    assert spent.n_evals == 1 and spent.reason == "1 gradient evaluations"


def test_refine_auto_warns_when_its_planned_time_runs_out(monkeypatch):
    import gpscale.methods.exact as exact_method
    import gpscale.train.exact_refine as exact_refine

    X, y = _data(n=600, noise=0.1, seed=5)
    monkeypatch.setattr(exact_method, "refine_evaluations", lambda n, d, rbf=True: 10)
    monkeypatch.setattr(exact_method, "REFINE_SECONDS", 100.0)
    monkeypatch.setattr(exact_refine, "time", _Clock(40.0))
    with pytest.warns(ConvergenceWarning, match="stopped at its planned 100 s after"):
        _, result = fit_exact(X, y, Scale(RBF(torch.ones(3), ard_dims=3)), solver="cg",
                              subsample=150, refine="auto", probes=8, seed=0)
    assert 1 <= sum(h.get("phase") == "refine" for h in result.history) < 10


def test_fit_exact_refines_on_all_rows(capsys):
    """solver="cg" with refine=K: θ from the sample, K steps on every row, then the
    posterior; the history says so, and ``progress`` shows both phases as bars."""
    X, y = _data(n=600, noise=0.1, seed=5)
    model, result = fit_exact(X, y, Scale(RBF(torch.ones(3), ard_dims=3)), solver="cg",
                              subsample=150, refine=3, probes=8, seed=0, progress=True)
    phases = [h.get("phase") for h in result.history]
    assert phases.count("refine") == 3 and phases[-1] == "all rows"
    assert result.history[-1]["converged"]
    bars = capsys.readouterr().err
    assert "refining θ on 600 rows" in bars and "3/3" in bars
    assert "CG on 600 rows" in bars
    assert len(result.history[-1]["residuals"]) == result.history[-1]["iterations"]
    pred = model.predict(X[:50])
    assert torch.isfinite(pred.mean).all() and (pred.var > 0).all()


def test_refine_through_the_api(tmp_path):
    X, y = _data(n=500, noise=0.1, seed=7)
    p = gpscale.fit(X.numpy(), y.numpy(), method="exact", solver="cg", subsample=120,
                    refine=2, probes=4)
    refined = p.model.solver.refined
    assert refined["evaluations"] == 2 and refined["start"] == "sample"
    path = tmp_path / "m.pt"
    p.save(path)
    q = gpscale.load(path)
    assert q.model.solver.refined == p.model.solver.refined  # gpscale info shows it from the file
    torch.testing.assert_close(torch.as_tensor(q.predict(X[:20].numpy())),
                               torch.as_tensor(p.predict(X[:20].numpy())), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("bad", ["abc", -1, 1.5])
def test_refine_must_be_auto_or_a_count(bad):
    X, y = _data(n=80)
    with pytest.raises(ValueError, match="refine must be"):
        fit_exact(X, y, Scale(RBF(torch.ones(3), ard_dims=3)), solver="cg", subsample=40,
                  refine=bad)
