"""The panelled symmetric ΦᵀΦ against the dense product (float64, tight tolerance)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gpscale.linalg.gram import add_upper_gram_, mirror_upper


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), p=st.integers(1, 70), block=st.integers(1, 80),
       chunks=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_panels_sum_to_the_dense_gram(n, p, block, chunks, seed):
    g = torch.Generator().manual_seed(seed)
    parts = [torch.randn(n + k, p, generator=g, dtype=torch.float64) for k in range(chunks)]
    gram = torch.zeros(p, p, dtype=torch.float64)
    for phi in parts:
        add_upper_gram_(gram, phi, block)
    want = sum(phi.mT @ phi for phi in parts)
    torch.testing.assert_close(mirror_upper(gram), want, rtol=1e-13, atol=1e-12)


def test_only_the_upper_triangle_and_diagonal_blocks_are_written():
    phi = torch.randn(9, 6, dtype=torch.float64)
    gram = add_upper_gram_(torch.zeros(6, 6, dtype=torch.float64), phi, block=2)
    diagonal_blocks = torch.block_diag(*[torch.ones(2, 2, dtype=torch.bool)] * 3)
    upper = torch.ones(6, 6, dtype=torch.bool).triu() | diagonal_blocks
    torch.testing.assert_close(gram[upper], (phi.mT @ phi)[upper], rtol=1e-14, atol=1e-14)
    assert (gram[~upper] == 0).all()


def test_shape_errors_say_what_is_expected():
    with pytest.raises(ValueError, match=r"gram must be \(3, 3\)"):
        add_upper_gram_(torch.zeros(2, 2), torch.zeros(4, 3))
    with pytest.raises(ValueError, match="block must be >= 1"):
        add_upper_gram_(torch.zeros(3, 3), torch.zeros(4, 3), block=0)
