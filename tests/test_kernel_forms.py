"""Each stationary formula is written in several forms, each in its own order of
operations so that fits reproduce bit for bit: the dense ``_k`` (autograd's), the
contraction ``_contract`` (closed-form gradients), the tiles' radial profile
(:mod:`gpscale.kernels.chunked`), the RBF's 1-D factors and GRIEF's 1-D grid kernel.
Here every form is held to one reference written from the formula itself, in float64,
over varied sizes, dimensions and length scales."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gpscale.features.grief import kernel_1d
from gpscale.kernels import make_kernel
from gpscale.kernels.chunked import dense_block, kernel_form, prepare_columns

D64 = torch.float64
NAMES = ["rbf-ard", "matern12-ard", "matern32-ard", "matern52-ard", "rq-ard"]
#: GRIEF's name of the same 1-D factor
GRIEF_NAME = {"rbf-ard": "rbf", "matern12-ard": "matern12", "matern32-ard": "matern32",
              "matern52-ard": "matern52"}


def reference(name: str, X1: np.ndarray, X2: np.ndarray, ls: np.ndarray,
              alpha: float = 1.0) -> np.ndarray:
    """k(x, x') from its textbook formula, r = ‖(x − x') / l‖."""
    diff = (X1[:, None, :] - X2[None, :, :]) / ls
    r2 = (diff * diff).sum(-1)
    r = np.sqrt(r2)
    if name == "rbf-ard":
        return np.exp(-r2 / 2)
    if name == "matern12-ard":
        return np.exp(-r)
    if name == "matern32-ard":
        return (1 + math.sqrt(3) * r) * np.exp(-math.sqrt(3) * r)
    if name == "matern52-ard":
        return (1 + math.sqrt(5) * r + 5 * r2 / 3) * np.exp(-math.sqrt(5) * r)
    return (1 + r2 / (2 * alpha)) ** (-alpha)


def _kernel(name: str, ls: np.ndarray):
    """The named kernel (unit output scale) with length scales ``ls``."""
    k = make_kernel(name, len(ls)).to(D64)
    with torch.no_grad():
        k.base.lengthscale = torch.as_tensor(ls, dtype=D64)
    return k


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(NAMES), n1=st.integers(1, 9), n2=st.integers(1, 11),
       d=st.integers(1, 4), log_ls=st.floats(-2.0, 2.0), seed=st.integers(0, 2**16))
def test_every_form_of_a_stationary_formula_agrees_with_the_formula(name, n1, n2, d,
                                                                     log_ls, seed):
    rng = np.random.default_rng(seed)
    X1, X2 = rng.normal(size=(n1, d)), rng.normal(size=(n2, d))
    X2[0] = X1[0]  # r = 0 in every case: the Matérn forms' square root at zero
    ls = np.exp(log_ls + 0.3 * rng.normal(size=d))
    k = _kernel(name, ls)
    alpha = float(k.base.alpha.detach()) if name == "rq-ard" else 1.0
    want = torch.as_tensor(reference(name, X1, X2, ls, alpha))
    T1, T2 = torch.as_tensor(X1), torch.as_tensor(X2)
    # r² by ‖a‖² + ‖b‖² − 2a·b carries an error ~ ε(‖a‖² + ‖b‖²); e^{−r} is not smooth
    # in r² at 0, so Matérn-1/2 there moves by its square root
    scale = float(((X1 / ls) ** 2).sum(1).max() + ((X2 / ls) ** 2).sum(1).max())
    near0 = math.sqrt(64 * np.finfo(float).eps * scale) if name == "matern12-ard" else 0.0

    with torch.no_grad():
        torch.testing.assert_close(k(T1, T2), want, rtol=1e-12, atol=1e-12 + near0)  # dense
        form = kernel_form(k)  # tiles: a GEMM of prepared columns through κ
        torch.testing.assert_close(dense_block(form, T1, prepare_columns(form, T2)), want,
                                   rtol=1e-12, atol=1e-10 + near0)
    G = torch.as_tensor(rng.normal(size=(n1, n2)))
    _, inner = k.vjp(T1, T2, G)  # the contraction's own evaluation of κ
    torch.testing.assert_close(inner, (G * want).sum(), rtol=1e-12,
                               atol=1e-12 + near0 * float(G.abs().sum()))
    if name == "rbf-ard":
        torch.testing.assert_close(k.base.factors(T1, T2).prod(0), want, rtol=1e-12,
                                   atol=1e-12)


@pytest.mark.parametrize("name", sorted(GRIEF_NAME))
def test_griefs_grid_kernel_is_the_same_formula(name):
    rng = np.random.default_rng(1)
    x, u = rng.normal(size=13), np.linspace(-2, 2, 7)
    for ls in (0.1, 1.0, 7.0):
        got = kernel_1d(GRIEF_NAME[name], torch.as_tensor(x), torch.as_tensor(u),
                        torch.tensor(ls, dtype=D64))
        want = reference(name, x[:, None], u[:, None], np.array([ls]))
        torch.testing.assert_close(got, torch.as_tensor(want), rtol=1e-12, atol=1e-12)
