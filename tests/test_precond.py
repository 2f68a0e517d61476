"""CG preconditioners for K + σ²I (gpscale.models.precond) against dense references."""

import itertools

import pytest
import torch

from gpscale.features.grief import grid_1d
from gpscale.kernels import RBF, Matern, RationalQuadratic, Scale
from gpscale.linalg import cg
from gpscale.models.precond import kernel_preconditioner, separable_form

F64 = torch.float64


def _x(n=60, d=2, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, d, generator=g, dtype=F64) * 2 - 1).to(device)


def test_separable_form_reads_rbf_and_matern_products():
    name, ls, s = separable_form(Scale(RBF([0.3, 0.7], ard_dims=2), 1.7), 2)
    assert name == "rbf" and ls.tolist() == pytest.approx([0.3, 0.7]) and float(s) == 1.7
    name, ls, s = separable_form(RBF(0.4), 3)  # one shared lengthscale, no Scale
    assert name == "rbf" and ls.tolist() == pytest.approx([0.4] * 3) and float(s) == 1.0
    k = Matern(1.5, 0.9, active_dims=[2]) * Matern(1.5, 0.2, active_dims=[0]) \
        * Matern(1.5, 0.5, active_dims=[1])  # any order of the factors
    name, ls, _ = separable_form(Scale(k, 2.0), 3)
    assert name == "matern32" and ls.tolist() == pytest.approx([0.2, 0.5, 0.9])
    assert separable_form(Matern(0.5, 0.3), 1)[0] == "matern12"


@pytest.mark.parametrize("kernel", [
    RationalQuadratic(1.0),                                         # not a product kernel
    RBF(1.0) + RBF(2.0),                                            # a sum
    Matern(2.5, [1.0, 1.0], ard_dims=2),                            # Matérn-ARD: not separable
    Matern(2.5, 1.0, active_dims=[0]) * Matern(1.5, 1.0, active_dims=[1]),  # mixed ν
    Matern(2.5, 1.0, active_dims=[0]) * Matern(2.5, 1.0, active_dims=[0]),  # column twice
    RBF(1.0, active_dims=[1]),                                      # misses column 0
])
def test_separable_form_rejects_other_kernels_and_says_what_to_use(kernel):
    with pytest.raises(ValueError, match="preconditioner='pivchol'"):
        separable_form(kernel, 2)
    with pytest.raises(ValueError, match="separable kernel"):
        kernel_preconditioner(kernel, _x(), torch.tensor(0.1, dtype=F64), "grief", 10)


def test_grief_preconditioner_at_p_equal_m_is_the_dense_nystrom_inverse(device):
    """p = m (every grid eigenfunction): P = s K_XU K_UU⁻¹ K_UX + σ²I exactly."""
    X = _x(50, 2, device=device)
    kernel = Scale(RBF([0.6, 0.9], ard_dims=2), 1.4).to(device)
    noise = torch.tensor(0.05, dtype=F64, device=device)
    m_bar = 4
    apply = kernel_preconditioner(kernel, X, noise, "grief", m_bar ** 2, m_bar=m_bar)
    grids = [grid_1d(X[:, i], m_bar) for i in range(2)]
    U = torch.tensor(list(itertools.product(*[g.tolist() for g in grids])), dtype=F64,
                     device=device)
    with torch.no_grad():
        KXU, KUU = kernel(X, U), kernel(U, U)
        P = KXU @ torch.linalg.solve(KUU, KXU.mT) + noise * torch.eye(50, dtype=F64,
                                                                      device=device)
    V = torch.randn(50, 3, dtype=F64, generator=torch.Generator().manual_seed(1)).to(device)
    torch.testing.assert_close(apply(V), torch.linalg.solve(P, V), rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(apply(V[:, 0]), torch.linalg.solve(P, V[:, 0]),
                               rtol=1e-8, atol=1e-10)


def test_pivchol_preconditioner_at_full_rank_is_the_exact_inverse(device):
    X = _x(40, 3, seed=2, device=device)
    kernel = Scale(RBF([0.5, 0.8, 1.1], ard_dims=3), 0.9).to(device)
    noise = torch.tensor(0.01, dtype=F64, device=device)
    apply = kernel_preconditioner(kernel, X, noise, "pivchol", 40)
    with torch.no_grad():
        C = kernel(X) + noise * torch.eye(40, dtype=F64, device=device)
    V = torch.randn(40, 2, dtype=F64, generator=torch.Generator().manual_seed(3)).to(device)
    torch.testing.assert_close(apply(V), torch.linalg.solve(C, V), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("kind", ["pivchol", "grief"])
def test_both_preconditioners_cut_cg_iterations_on_a_smooth_kernel(kind):
    X = _x(400, 2, seed=4)
    kernel = Scale(RBF([0.4, 0.6], ard_dims=2), 1.0)
    noise = torch.tensor(1e-3, dtype=F64)
    with torch.no_grad():
        C = kernel(X) + noise * torch.eye(400, dtype=F64)
    b = torch.randn(400, dtype=F64, generator=torch.Generator().manual_seed(5))
    _, plain = cg(lambda v: C @ v, b, tol=1e-8, max_iter=2000)
    x, info = cg(lambda v: C @ v, b, tol=1e-8, max_iter=2000,
                 precond=kernel_preconditioner(kernel, X, noise, kind, 100))
    assert info.converged and info.iterations < plain.iterations / 3
    torch.testing.assert_close(x, torch.linalg.solve(C, b), rtol=1e-5, atol=1e-6)


def test_none_and_rank_zero_mean_no_preconditioner_and_bad_arguments_are_named():
    X, kernel, noise = _x(), RBF(1.0), torch.tensor(0.1, dtype=F64)
    assert kernel_preconditioner(kernel, X, noise, "none", 50) is None
    assert kernel_preconditioner(kernel, X, noise, "grief", 0) is None
    with pytest.raises(ValueError, match="unknown preconditioner 'jacobi'"):
        kernel_preconditioner(kernel, X, noise, "jacobi", 10)
    with pytest.raises(ValueError, match="precond_rank must be an int"):
        kernel_preconditioner(kernel, X, noise, "pivchol", 2.5)
