"""SparseGP (Cao et al. 2013 §3.1): factored DTC / VFE objectives and predictions
against dense formulas written naively with torch."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gpscale.kernels import RBF, Scale
from gpscale.models import ExactGP, SparseGP


def _problem(n, d, seed, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    X = (torch.rand(n, d, generator=g, dtype=torch.float64) * 6).to(device)
    y = (torch.sin(X.sum(1)) + 0.2 * torch.randn(n, generator=g, dtype=torch.float64)
         .to(device))
    return X, y, Scale(RBF(0.9, ard_dims=d), 1.4)


def dense_objective(kernel, X, y, idx, noise, kind):
    """−log N(y | 0, K̂ + σ²I) (+ tr(K − K̂) / 2σ² for VFE), all n × n, naive."""
    K = kernel(X, X)
    K_nI = K[:, idx]
    Khat = K_nI @ torch.linalg.solve(K[idx][:, idx], K_nI.mT)
    C = Khat + noise * torch.eye(len(y), dtype=X.dtype, device=X.device)
    nll = 0.5 * (y @ torch.linalg.solve(C, y) + torch.logdet(C) + len(y) * math.log(2 * math.pi))
    if kind == "vfe":
        nll = nll + 0.5 * torch.trace(K - Khat) / noise
    return nll


@pytest.mark.parametrize("kind", ["vfe", "dtc"])
def test_objective_equals_dense(kind, device):
    X, y, kern = _problem(45, 2, 0, device)
    idx = torch.tensor([3, 17, 40, 8, 22, 31, 0], device=device)
    model = SparseGP(kern, X, y, idx, noise=0.08, objective=kind, device=device)
    ref = dense_objective(model.kernel, X, y, idx, model.noise, kind)
    got = model.objective()
    assert torch.allclose(got, ref, rtol=1e-10, atol=1e-9)
    for key, value in model.terms(qr=True).items():  # eqs. (11)-(12) by Householder QR
        assert torch.allclose(value, model.terms()[key], rtol=1e-10, atol=1e-9), key
    # gradients in every hyperparameter (autograd through the factored form vs dense)
    params = [p for p in model.parameters() if p.requires_grad]
    g_got = torch.autograd.grad(got, params)
    g_ref = torch.autograd.grad(ref, params)
    for a, b in zip(g_got, g_ref):
        assert torch.allclose(a, b, rtol=1e-7, atol=1e-8)


@settings(max_examples=12, deadline=None)
@given(n=st.integers(30, 60), m=st.integers(1, 12), d=st.integers(1, 4),
       seed=st.integers(0, 1000), kind=st.sampled_from(["vfe", "dtc"]))
def test_objective_equals_dense_shapes(n, m, d, seed, kind):
    X, y, kern = _problem(n, d, seed)
    idx = torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:m]
    model = SparseGP(kern, X, y, idx, noise=0.1, objective=kind)
    K = model.kernel(X[idx], X[idx])
    if torch.linalg.cond(K) > 1e8:  # near-duplicate inducing inputs: dense solve unreliable
        return
    ref = dense_objective(model.kernel, X, y, idx, model.noise, kind)
    assert torch.allclose(model.objective(), ref, rtol=1e-9, atol=1e-8)
    terms = model.terms()
    assert terms["E_V"] >= -1e-10  # tr(K − K̂) ≥ 0


def test_dtc_at_m_equal_n_is_exact_nlml(device):
    X, y, kern = _problem(30, 1, 1, device)
    # spread inputs: K itself must be well conditioned for m = n
    X = torch.linspace(0, 20, 30, dtype=torch.float64, device=device)[:, None]
    perm = torch.randperm(30, generator=torch.Generator().manual_seed(0)).to(device)
    model = SparseGP(kern, X, y, perm, noise=0.05, objective="dtc", device=device)
    exact = ExactGP(Scale(RBF(0.9), 1.4), X, y, noise=0.05, device=device)
    assert torch.allclose(model.objective(), exact.nlml(), rtol=1e-10, atol=1e-9)
    # the VFE bound is tight at m = n (tr(K − K̂) = 0)
    vfe = SparseGP(kern, X, y, perm, noise=0.05, objective="vfe", device=device)
    assert torch.allclose(vfe.objective(), exact.nlml(), rtol=1e-9, atol=1e-8)
    mean, var = model.predict(X[:7] + 0.05)
    emean, evar = exact.predict(X[:7] + 0.05)
    assert torch.allclose(mean, emean, atol=1e-8)
    assert torch.allclose(var, evar, atol=1e-8)


def test_predict_equals_dense(device):
    X, y, kern = _problem(40, 2, 2, device)
    idx = torch.tensor([1, 5, 9, 13, 20, 33], device=device)
    model = SparseGP(kern, X, y, idx, noise=0.1, device=device)
    Xs = torch.rand(9, 2, dtype=torch.float64, device=device) * 6
    with torch.no_grad():
        k = model.kernel
        K_II, K_In, K_sI = k(X[idx], X[idx]), k(X[idx], X), k(Xs, X[idx])
        s2 = model.noise
        S = s2 * K_II + K_In @ K_In.mT
        mean_ref = K_sI @ torch.linalg.solve(S, K_In @ y)
        var_ref = (k.diag(Xs) - (K_sI * torch.linalg.solve(K_II, K_sI.mT).mT).sum(1)
                   + s2 * (K_sI * torch.linalg.solve(S, K_sI.mT).mT).sum(1))
    mean = model.predict(Xs).mean
    assert torch.allclose(mean, mean_ref, atol=1e-10)
    m2, var = model.predict(Xs)
    assert torch.allclose(var, var_ref, atol=1e-10)
    _, var_y = model.predict(Xs, include_noise=True)  # the Predictor's call
    assert torch.allclose(var_y, var_ref + s2, atol=1e-10)


def test_bad_input():
    X, y, kern = _problem(10, 1, 3)
    with pytest.raises(ValueError, match="duplicate"):
        SparseGP(kern, X, y, [1, 1])
    with pytest.raises(ValueError, match="outside"):
        SparseGP(kern, X, y, [0, 10])
    with pytest.raises(ValueError, match="empty"):
        SparseGP(kern, X, y, [])
    with pytest.raises(ValueError, match="objective"):
        SparseGP(kern, X, y, [0], objective="fitc")
    with pytest.raises(ValueError, match="noise"):
        SparseGP(kern, X, y, [0], noise=-1.0)
    with pytest.raises(ValueError, match="inducing"):
        SparseGP(kern, X, y, torch.tensor([[0, 1]]))
    with pytest.raises(ValueError, match="y"):
        SparseGP(kern, X, y * float("nan"), [0])
    model = SparseGP(kern, X, y, [0, 4])
    with pytest.raises(ValueError, match="inducing"):
        model.set_inducing([3, 3])
    model.set_inducing([3, 5, 7])
    assert model.m == 3


def _autograd_objective(model):
    """The previous implementation of SparseGP.objective: autograd through the factored
    terms of eqs. (9), (11), (12)."""
    t = model.terms()
    total = t["E_D"] + t["E_C"] + (t["E_V"] if model.objective_kind == "vfe" else 0.0)
    return 0.5 * total + 0.5 * model.n * math.log(2 * math.pi)


@pytest.mark.parametrize("kind", ["vfe", "dtc"])
def test_written_out_gradient_equals_autograd(kind):
    """objective() goes through VFEBound's written-out gradient (Z = X[I], K_ZZ the
    columns I of K_ZX): value and gradient in every hyperparameter, σ² and every input
    (the inducing inputs X[I] among them) equal autograd through terms() and the dense
    n × n formula."""
    X, y, kern = _problem(40, 3, 5)
    kern = kern + Scale(RBF(2.0), 0.3)  # several parameter kinds
    idx = [3, 17, 38, 8, 22, 31, 0, 12]
    model = SparseGP(kern, X, y, idx, noise=0.07, objective=kind)
    with torch.no_grad():  # ARD lengthscales away from their common start
        model.kernel.kernels[0].base.lengthscale = torch.tensor([0.7, 1.3, 2.1],
                                                                dtype=torch.float64)
    params = [p for p in model.parameters() if p.requires_grad]
    assert len(params) == 5
    got, ref = model.objective(), _autograd_objective(model)
    dense = dense_objective(model.kernel, X, y, idx, model.noise, kind)
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=0)
    torch.testing.assert_close(got, dense, rtol=1e-10, atol=0)
    g_got = torch.autograd.grad(got, params)
    g_ref = torch.autograd.grad(ref, params)
    g_dense = torch.autograd.grad(dense, params)
    for a, b, c in zip(g_got, g_ref, g_dense):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10 * float(b.abs().max()))
        torch.testing.assert_close(a, c, rtol=1e-8, atol=1e-8 * float(c.abs().max()))
    # inputs: with X requiring grad the inducing inputs X[I] move with it
    model.X.requires_grad_(True)
    gx = torch.autograd.grad(model.objective(), model.X)[0]
    gx_ref = torch.autograd.grad(_autograd_objective(model), model.X)[0]
    assert gx[idx].abs().max() > 0
    torch.testing.assert_close(gx, gx_ref, rtol=1e-10, atol=1e-10 * float(gx_ref.abs().max()))


def test_written_out_gradient_keeps_discrete_kernel_memo(monkeypatch):
    """The backward of K(X, Z) by the kernel's contraction passes X and Z themselves,
    so a count kernel's reduction is computed once for the whole hyperparameter phase."""
    from gpscale.kernels import Tanimoto

    g = torch.Generator().manual_seed(4)
    X = torch.randint(0, 3, (30, 12), generator=g).double()
    y = torch.randn(30, generator=g, dtype=torch.float64)
    model = SparseGP(Scale(Tanimoto()), X, y, [0, 5, 9, 20], noise=0.2)
    base = model.kernel.base
    reductions = []
    reduce_raw = base._reduce_raw
    monkeypatch.setattr(base, "_reduce_raw", lambda *a: reductions.append(1) or reduce_raw(*a))
    params = [p for p in model.parameters() if p.requires_grad]
    torch.autograd.grad(model.objective(), params)
    first = len(reductions)
    for _ in range(3):
        with torch.no_grad():
            model.noise = model.noise * 1.1
        got = model.objective()
        g_got = torch.autograd.grad(got, params)
        g_ref = torch.autograd.grad(_autograd_objective(model), params)
        for a, b in zip(g_got, g_ref):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    assert first == 1 and len(reductions) == first  # K(X, Z) never reduced again
