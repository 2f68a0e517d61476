import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gpscale.kernels import (
    KERNELS,
    RBF,
    Linear,
    LocallyPeriodic,
    Matern,
    Periodic,
    RationalQuadratic,
    Scale,
    from_config,
    kernel_matmul,
    make_kernel,
)
from gpscale.kernels.chunked import kernel_product
from gpscale.params import FLOOR_MARGIN

D64 = torch.float64


def _x(n, d, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, d, generator=g, dtype=D64) * 3).to(device)


def _randomise(kernel, seed=1):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in kernel.parameters():
            p.add_(0.5 * torch.randn(p.shape, generator=g, dtype=D64).to(p.device))
    return kernel


def test_rbf_ard_formula(device):
    X1, X2 = _x(5, 3, device=device), _x(4, 3, seed=2, device=device)
    k = Scale(RBF([0.5, 1.0, 2.0], ard_dims=3), 1.7).to(device)
    ls = torch.tensor([0.5, 1.0, 2.0], dtype=D64, device=device)
    diff = (X1[:, None, :] - X2[None, :, :]) / ls
    ref = 1.7 * torch.exp(-0.5 * (diff**2).sum(-1))
    torch.testing.assert_close(k(X1, X2), ref, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(k.diag(X1), torch.full((5,), 1.7, dtype=D64, device=device))
    # product over dimensions of its 1-D factors
    torch.testing.assert_close(k.base.factors(X1, X2).prod(0) * 1.7, ref)


def test_matern_and_rq_formulas():
    X1, X2 = _x(6, 2), _x(5, 2, seed=3)
    r = torch.cdist(X1 / 0.8, X2 / 0.8)
    s3, s5 = math.sqrt(3) * r, math.sqrt(5) * r
    refs = {0.5: torch.exp(-r), 1.5: (1 + s3) * torch.exp(-s3),
            2.5: (1 + s5 + s5**2 / 3) * torch.exp(-s5)}
    for nu, ref in refs.items():
        torch.testing.assert_close(Matern(nu, 0.8)(X1, X2), ref, rtol=1e-10, atol=1e-12)
    rq = RationalQuadratic(0.8, alpha=2.5)(X1, X2)
    torch.testing.assert_close(rq, (1 + r**2 / 5.0) ** -2.5, rtol=1e-10, atol=1e-12)


def test_locally_periodic_is_paper_eq_20():
    X1, X2 = _x(6, 1), _x(4, 1, seed=4)
    k = LocallyPeriodic(lengthscale=0.7, period=1.3)
    d = X1 - X2.T
    ref = torch.exp(-2 * torch.sin(math.pi * d.abs() / 1.3) ** 2 / 0.49) * torch.exp(-d**2 / 0.98)
    torch.testing.assert_close(k(X1, X2), ref, rtol=1e-12, atol=1e-14)
    per = Periodic(lengthscale=0.7, period=1.3)(X1, X2)
    torch.testing.assert_close(per, torch.exp(-2 * torch.sin(math.pi * d / 1.3) ** 2 / 0.49))


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_vjp_matches_autograd(name, device):
    X1, X2 = _x(9, 2, device=device), _x(7, 2, seed=5, device=device)
    if name in ("hamming", "tanimoto", "tanimoto-dot", "intersection", "spectrum"):
        X1, X2 = (X1 * 3).round().abs(), (X2 * 3).round().abs()  # integer codes / counts
    k = _randomise(make_kernel(name, 2)).to(device)
    G = torch.randn(9, 7, dtype=D64, generator=torch.Generator().manual_seed(0)).to(device)
    grads, inner = k.vjp(X1, X2, G)
    K = k(X1, X2)
    params = [p for p in k.parameters() if p.requires_grad]
    ref = torch.autograd.grad((G * K).sum(), params)
    torch.testing.assert_close(inner, (G * K).sum().detach(), rtol=1e-11, atol=1e-12)
    assert set(grads) == set(params)
    for p, r in zip(params, ref):
        torch.testing.assert_close(grads[p], r, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", ["rbf-ard", "matern32-ard", "rq-ard", "se+lp"])
def test_gradcheck_through_kernel(name):
    X = _x(6, 2)
    k = _randomise(make_kernel(name, 2))
    params = list(k.parameters())

    # gradcheck perturbs copies of the parameters; route them in by functional_call
    def g(*raw):
        state = {n: v for (n, _), v in zip(k.named_parameters(), raw)}
        return torch.func.functional_call(k, state, (X, X)).sum()

    inputs = tuple(p.detach().clone().requires_grad_() for p in params)
    assert torch.autograd.gradcheck(g, inputs)


@settings(max_examples=20, deadline=None)
@given(n1=st.integers(1, 23), n2=st.integers(1, 19), cols=st.integers(1, 4),
       block=st.integers(1, 30), name=st.sampled_from(["rbf-ard", "matern52-ard", "rq-ard",
                                                       "periodic", "co2"]))
def test_chunked_matmul_equals_dense(n1, n2, cols, block, name):
    X1, X2 = _x(n1, 1, seed=n1), _x(n2, 1, seed=100 + n2)
    k = _randomise(make_kernel(name, 1))
    V = torch.randn(n2, cols, dtype=D64, generator=torch.Generator().manual_seed(cols))
    V.requires_grad_()
    W = torch.randn(n1, cols, dtype=D64, generator=torch.Generator().manual_seed(7))
    out = kernel_matmul(k, X1, X2, V, block=block)
    params = [p for p in k.parameters()]
    got = torch.autograd.grad((out * W).sum(), [V, *params])
    dense = k(X1, X2) @ V
    ref = torch.autograd.grad((dense * W).sum(), [V, *params])
    torch.testing.assert_close(out, dense.detach(), rtol=1e-12, atol=1e-12)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)


def test_chunked_matmul_vector_and_errors():
    X = _x(10, 2)
    k = make_kernel("rbf-ard", 2)
    v = torch.ones(10, dtype=D64)
    torch.testing.assert_close(kernel_matmul(k, X, X, v, block=3), (k(X) @ v).detach())
    with pytest.raises(ValueError, match="rows"):
        kernel_matmul(k, X, X, torch.ones(4, dtype=D64))
    with pytest.raises(ValueError, match="inputs"):
        kernel_matmul(k, X.clone().requires_grad_(), X, v)


class _MyRBF(RBF, name="test_kernels.MyRBF"):
    """A trivial subclass: the RBF's formula, so the RBF's tiled form."""


class _MyMatern(Matern, name="test_kernels.MyMatern"):
    pass


class _MyRQ(RationalQuadratic, name="test_kernels.MyRQ"):
    pass


class _HalfRBF(RBF, name="test_kernels.HalfRBF"):
    """Overrides the formula (k/2): the RBF's tiled form and closed vjp would be wrong."""

    def _k(self, X1, X2):
        return 0.5 * super()._k(X1, X2)


@pytest.mark.parametrize("sub,parent", [
    (lambda: Scale(_MyRBF([0.7, 1.3], ard_dims=2), 1.7),
     lambda: Scale(RBF([0.7, 1.3], ard_dims=2), 1.7)),
    (lambda: _MyMatern(0.5, 0.9), lambda: Matern(0.5, 0.9)),
    (lambda: Scale(_MyMatern(2.5, [0.5, 1.2], ard_dims=2), 0.6),
     lambda: Scale(Matern(2.5, [0.5, 1.2], ard_dims=2), 0.6)),
    (lambda: _MyRQ(0.8, alpha=0.6), lambda: RationalQuadratic(0.8, alpha=0.6))])
def test_a_subclass_keeps_its_parents_tiled_form(sub, parent, device):
    X1, X2 = _x(23, 2, seed=3, device=device), _x(19, 2, seed=4, device=device)
    V = torch.randn(19, 3, dtype=D64, generator=torch.Generator().manual_seed(5)).to(device)
    k, ref = sub().to(device), parent().to(device)
    assert k.tiled_form() is not None
    with torch.no_grad():
        dense = k(X1, X2) @ V
    scale = float(dense.abs().max().clamp_min(1.0))
    matern12 = isinstance(k, Matern) and k.nu == 0.5  # e^{−r}: √δ at r = 0 (test_iterative)
    for dtype, tol in ((None, 1e-7 if matern12 else 1e-12),
                       (torch.float32, 2e-3 if matern12 else 1e-5)):
        out = kernel_product(k, X1, X2, V, block_dtype=dtype)
        assert torch.equal(out, kernel_product(ref, X1, X2, V, block_dtype=dtype))
        torch.testing.assert_close(out, dense, rtol=0, atol=tol * scale)
    G = torch.randn(23, 19, dtype=D64, generator=torch.Generator().manual_seed(6)).to(device)
    grads, inner = k.vjp(X1, X2, G)
    ref_grads, ref_inner = ref.vjp(X1, X2, G)
    assert torch.equal(inner, ref_inner)
    assert all(torch.equal(g, r) for g, r in zip(grads.values(), ref_grads.values()))


def test_a_subclass_that_rewrites_the_formula_does_not_use_its_parents(device):
    X1, X2 = _x(23, 2, seed=3, device=device), _x(19, 2, seed=4, device=device)
    V = torch.randn(19, 3, dtype=D64, generator=torch.Generator().manual_seed(5)).to(device)
    k = Scale(_HalfRBF([0.7, 1.3], ard_dims=2), 1.7).to(device)
    assert k.tiled_form() is None
    with torch.no_grad():
        dense = k(X1, X2) @ V
    for dtype in (None, torch.float32):
        torch.testing.assert_close(kernel_product(k, X1, X2, V, block_dtype=dtype), dense,
                                   rtol=1e-12, atol=1e-12)
    G = torch.randn(23, 19, dtype=D64, generator=torch.Generator().manual_seed(6)).to(device)
    params = list(k.parameters())
    want = torch.autograd.grad((k(X1, X2) * G).sum(), params)
    grads, _ = k.vjp(X1, X2, G)
    for p, w in zip(params, want):
        torch.testing.assert_close(grads[p], w, rtol=1e-10, atol=1e-12)


def test_config_round_trip_and_summary():
    k = _randomise(make_kernel("co2", 1))
    k2 = from_config(k.config())
    k2.load_state_dict(k.state_dict())
    X = _x(5, 1)
    torch.testing.assert_close(k(X), k2(X))
    text = k.summary()
    assert "outputscale" in text and "softplus" in text and "period" in text


def test_kernel_argument_errors():
    with pytest.raises(ValueError, match="ard_dims"):
        RBF([1.0, 2.0], ard_dims=3)
    with pytest.raises(ValueError, match="columns"):
        RBF(1.0, ard_dims=3)(_x(4, 2))
    with pytest.raises(ValueError, match="greater than"):
        RBF(-1.0)
    with pytest.raises(ValueError, match="nu"):
        Matern(nu=2.0)
    with pytest.raises(TypeError):
        RBF() + 3  # noqa: B018


def test_positive_value_at_its_floor_round_trips():
    k = RBF(1.0)
    with torch.no_grad():
        k.raw_lengthscale.fill_(-1000.0)  # softplus underflows: the value reads as the floor
    floor = type(k).lengthscale.floor
    assert k.lengthscale.item() == floor
    k.lengthscale = k.lengthscale.detach()  # e.g. copying fitted values into a new model
    assert k.lengthscale.item() == pytest.approx(floor, rel=2 * FLOOR_MARGIN)
    assert torch.isfinite(k.raw_lengthscale).all()
    # stored a hair above the floor, the parameter still has a gradient: an optimiser
    # can move it off again (at the floor itself the gradient was exactly zero)
    k.raw_lengthscale.grad = None
    k.lengthscale.sum().backward()
    assert float(k.raw_lengthscale.grad) >= 0.5 * FLOOR_MARGIN * floor
    with pytest.raises(ValueError, match="greater than"):
        k.lengthscale = floor / 2


@pytest.mark.parametrize("make", [
    lambda: Scale(RBF([0.7, 1.3, 0.9], ard_dims=3), 1.7),
    lambda: Matern(0.5, lengthscale=[0.8, 1.2, 1.0], ard_dims=3),
    lambda: Matern(1.5, lengthscale=0.9),
    lambda: Scale(Matern(2.5, lengthscale=[1.1, 0.6], ard_dims=2, active_dims=[0, 2])),
    lambda: RationalQuadratic(lengthscale=[0.9, 1.4, 0.7], alpha=1.5, ard_dims=3),
    lambda: Linear() + Periodic(),  # no closed form: the autograd default
])
def test_vjp_inputs_and_cross_matrix_against_autograd(make, device):
    """Kernel.vjp_inputs (closed form for stationary kernels, autograd otherwise) and
    cross_matrix's backward equal autograd through K(X1, X2) for θ and X1."""
    from gpscale.kernels.base import cross_matrix

    g = torch.Generator().manual_seed(3)
    X1 = torch.randn(7, 3, generator=g, dtype=torch.float64).to(device)
    X2 = torch.randn(11, 3, generator=g, dtype=torch.float64).to(device)
    G = torch.randn(7, 11, generator=g, dtype=torch.float64).to(device)
    k = make().to(device)
    params = [p for p in k.parameters() if p.requires_grad]
    X1g = X1.clone().requires_grad_()
    K = k(X1g, X2)
    want = torch.autograd.grad((G * K).sum(), [X1g, *params])
    grads, inner, g_x1 = k.vjp_inputs(X1, X2, G)
    torch.testing.assert_close(inner, (G * K.detach()).sum(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g_x1, want[0], rtol=1e-10, atol=1e-12)
    for p, w in zip(params, want[1:]):
        torch.testing.assert_close(grads[p], w, rtol=1e-10, atol=1e-12)
    X1c = X1.clone().requires_grad_()
    C = cross_matrix(k, X1c, X2)
    torch.testing.assert_close(C, K.detach(), rtol=0, atol=0)
    got = torch.autograd.grad((G * C).sum(), [X1c, *params])
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
