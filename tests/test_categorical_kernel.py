"""The exchangeable kernel of a categorical column (kernels/categorical.py) against dense
references: its values, its vjp against autograd, positive definiteness, save and load,
and the table kernel it makes with a stationary kernel on the numeric columns."""

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gpscale.kernels import Exchangeable, Kernel, from_config, mixed_kernel


def _one_hot(levels, width):
    """Rows of a one-hot block; level -1 is an unseen level (all zeros)."""
    X = torch.zeros(len(levels), width, dtype=torch.float64)
    for i, level in enumerate(levels):
        if level >= 0:
            X[i, level] = 1.0
    return X


@settings(max_examples=25, deadline=None)
@given(levels=st.lists(st.integers(-1, 3), min_size=1, max_size=12),
       theta=st.floats(0.01, 5.0))
def test_values_are_one_on_a_level_and_rho_across(levels, theta):
    X = _one_hot(levels, 4)
    k = Exchangeable(theta)
    want = np.array([[1.0 if a == b else np.exp(-theta) for b in levels] for a in levels])
    np.testing.assert_allclose(k(X).detach().numpy(), want, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(k.diag(X).detach().numpy(), 1.0, rtol=1e-15)
    assert np.linalg.eigvalsh(k(X).detach().numpy()).min() > -1e-12  # PSD
    Z = torch.rand(5, 4, dtype=torch.float64)  # rows that are not one-hot (inducing inputs)
    torch.testing.assert_close(k.diag(Z), torch.diagonal(k(Z)), rtol=1e-14, atol=1e-15)


def test_vjp_matches_autograd_also_in_a_product_with_rbf():
    gen = torch.Generator().manual_seed(0)
    levels = torch.randint(-1, 3, (9,), generator=gen).tolist()
    X = torch.cat([torch.randn(9, 2, generator=gen, dtype=torch.float64),
                   _one_hot(levels, 3)], dim=1)
    X2 = X[:5] + 0.0
    G = torch.randn(9, 5, generator=gen, dtype=torch.float64)
    for k in (Exchangeable(0.7, active_dims=[2, 3, 4]), mixed_kernel(5, [[2, 3, 4]])):
        grads, inner = k.vjp(X, X2, G)
        want = Kernel.vjp(k, X, X2, G)  # the autograd default
        torch.testing.assert_close(inner, want[1], rtol=1e-13, atol=1e-13)
        for p, g in want[0].items():
            torch.testing.assert_close(grads[p], g, rtol=1e-12, atol=1e-13)


def test_table_kernel_is_positive_definite_and_saves_and_loads():
    gen = torch.Generator().manual_seed(1)
    X = torch.cat([torch.randn(30, 2, generator=gen, dtype=torch.float64),
                   _one_hot(torch.randint(0, 3, (30,), generator=gen).tolist(), 3),
                   _one_hot(torch.randint(-1, 2, (30,), generator=gen).tolist(), 2)], dim=1)
    k = mixed_kernel(7, [[2, 3, 4], [5, 6]], theta=0.4)
    assert np.linalg.eigvalsh(k(X).detach().numpy()).min() > -1e-12
    assert k.raw_columns(7) == [2, 3, 4, 5, 6]  # the one-hot blocks stay 0/1
    back = from_config(k.config())
    back.load_state_dict(k.state_dict())
    torch.testing.assert_close(back(X), k(X), rtol=0, atol=0)
