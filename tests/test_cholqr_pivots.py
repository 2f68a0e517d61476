"""CholQR's information-pivot variants (Cao et al. 2013 §3.3, Fig. 3(c)/(f)): "OI", the
pivots CSI's greedy residual Cholesky picks, and "AA", a pivot set grown after each
rejected swap (our rule), each against dense float64 references at small n."""

import math

import pytest
import torch
from test_cholqr import _dense_approx_gains, _model_objective, _problem

from gpscale.linalg import CholQRFactors
from gpscale.models import SparseGP
from gpscale.train import cholqr as cq
from gpscale.train.cholqr_scoring import InfoPivots, greedy_residual_pivots


def _dense_residual(kern, X, I):
    """E = K − K[:, I] K[I, I]⁻¹ K[I, :] from the dense n × n kernel matrix."""
    K = kern(X, X).detach()
    Ii = torch.tensor(I, device=X.device)
    C = torch.linalg.cholesky(K[Ii][:, Ii])
    L = torch.linalg.solve_triangular(C, K[Ii], upper=False).mT
    return K, K - L @ L.mT


def _dense_greedy(E, I, count, K, rtol=1e-8, first=()):
    """Pivoted Cholesky of E, the given ``first`` pivots taken first, then ``count``
    more by largest remaining diagonal among the points not in I (nor taken)."""
    n = E.shape[0]
    G = torch.zeros(n, 0, dtype=E.dtype, device=E.device)
    taken = []
    for t in range(len(first) + count):
        d = torch.diagonal(E) - (G * G).sum(1)
        if t < len(first):
            j = first[t]
        else:
            d = d.clone()
            d[list(I) + taken] = -math.inf
            j = int(torch.argmax(d))
            if not bool(d[j] > rtol * K[j, j]):
                break
        c = E[:, j] - G @ G[j]
        g = c / c[j].sqrt() if bool(c[j] > rtol * K[j, j]) else torch.zeros_like(c)
        G = torch.cat([G, g[:, None]], 1)
        taken.append(j)
    return taken[len(first):]


def test_oi_pivots_equal_dense_greedy_residual_selection(device):
    """§4.1's OI: the z pivots are those of a pivoted Cholesky of K − K̂ (largest residual
    diagonal first), for the current set, also after swaps; their cached columns are
    E[:, J]."""
    n, noise = 80, 0.05
    X, y, kern = _problem(n, 2, 31, device)
    g = torch.Generator().manual_seed(5)
    f = CholQRFactors(kern, X, y, torch.randperm(n, generator=g)[:8].tolist(), noise)
    info = InfoPivots(f, z=10, generator=g, select="oi")
    for step in range(4):
        K, E = _dense_residual(kern, X, f.pivots)
        assert info.J == _dense_greedy(E, f.pivots, 10, K)
        torch.testing.assert_close(info.Rz, E[:, info.J], rtol=0, atol=1e-10)
        p = int(torch.randint(f.k, (1,), generator=g))
        info.remove(f, p)
        free = [t for t in range(n) if t not in f.pivots and t not in info.J]
        info.add(f, free[step])
        info.refresh(f)  # §3.3.2's redraw: for OI, the greedy pivots of the new set
    J, Rz = greedy_residual_pivots(f, 3, exclude=info.J[:2])
    K, E = _dense_residual(kern, X, f.pivots)
    assert J == _dense_greedy(E, f.pivots + info.J[:2], 3, K)


def test_oi_stops_when_the_residual_is_explained():
    X, y, kern = _problem(30, 1, 32)
    X[20:] = X[:10]  # ten duplicates: at most 20 points carry residual variance
    f = CholQRFactors(kern, X, y, [0, 1, 2], 0.1)
    J, Rz = greedy_residual_pivots(f, 30)
    assert 0 < len(J) <= 17 and Rz.shape == (30, len(J)) and not set(J) & {0, 1, 2}


@pytest.mark.parametrize("kind", ["vfe", "dtc"])
def test_oi_approx_gains_equal_dense_formula(kind, device):
    """The approximate ΔF of every candidate with the OI pivots, after a downdate (as in
    a swap attempt), equals eqs. (14)–(16) with ℓ_j ≈ L_z a_j/‖a_j‖ from dense matrices;
    and the replacement of an OI pivot that entered the inducing set is the point of
    largest diagonal of K − K̂ − L_z L_zᵀ, L_z from the other pivots."""
    n, noise = 70, 0.05
    X, y, kern = _problem(n, 2, 33, device)
    f = CholQRFactors(kern, X, y, [3, 12, 25, 31, 7, 44, 60], noise)
    info = InfoPivots(f, z=6, generator=torch.Generator().manual_seed(0), select="oi")
    i, _ = info.remove(f, 2)
    got = info.approx_gains(f, kind, exclude=[i])
    dense = _dense_approx_gains(kern, X.cpu(), y.cpu(), f.pivots, info.J, noise, kind)
    dense[i] = -math.inf
    torch.testing.assert_close(got.cpu(), dense, rtol=1e-9, atol=1e-10)
    j = info.J[1]  # an information pivot is accepted into the set
    info.add(f, j)
    others = [t for t in info.J if t != j]
    info.replace(f, j)
    K, E = _dense_residual(kern, X, f.pivots)
    assert info.J == others[:1] + _dense_greedy(E, f.pivots, 1, K, first=others) + others[1:]
    torch.testing.assert_close(info.Rz, E[:, info.J], rtol=0, atol=1e-10)


def test_aa_grows_after_each_rejection_up_to_z_max(device):
    """Our AA rule: a rejected swap adds z_step random pivots (never past z_max), an
    accepted one leaves the count; the grown cache scores as one built from scratch and
    as the dense formula."""
    n, noise = 120, 0.05
    X, y, kern = _problem(n, 2, 34, device)
    model = SparseGP(kern, X, y, list(range(10)), noise=noise, objective="vfe",
                     device=device)
    sw = cq._Swapper(model, z=4, refresh_every=7, gen=torch.Generator().manual_seed(1),
                     info_pivots="aa", z_step=3, z_max=14)
    assert len(sw.info.J) == 4
    grew = 0
    for _ in range(40):
        before = len(sw.info.J)
        accepted = sw.attempt()
        after = len(sw.info.J)
        assert after == (before if accepted else min(before + 3, 14))
        grew += after > before
        assert len(set(sw.info.J)) == after and not set(sw.info.J) & set(sw.f.pivots)
        assert math.isclose(sw.F, _model_objective(kern, X, y, sw.f.pivots, noise, "vfe"),
                            rel_tol=1e-9, abs_tol=1e-8)
    assert grew >= 1 and len(sw.info.J) == 14
    f, info = sw.f, sw.info
    fresh = InfoPivots(f, z=1, generator=torch.Generator().manual_seed(0))
    fresh.set_pivots(f, info.J)
    torch.testing.assert_close(info.approx_gains(f), fresh.approx_gains(f), rtol=1e-9,
                               atol=1e-10)
    added = info.grow(f, 2)  # grown by hand: the new columns are E[:, new]
    assert len(added) == 2 and info.J[-2:] == added and info.z == 16
    dense = _dense_approx_gains(kern, X.cpu(), y.cpu(), f.pivots, info.J, noise, "vfe")
    torch.testing.assert_close(info.approx_gains(f).cpu(), dense, rtol=1e-9, atol=1e-10)


def test_fit_cholqr_variants_and_options():
    """Both variants run the whole descent (never increasing the objective, the value
    that of the returned set); AA's pivot count is carried across epochs."""
    X, y, kern = _problem(150, 2, 35)
    for sel in ("oi", "aa"):
        model, res = cq.fit_cholqr(X, y, kern, 12, seed=2, max_epochs=4, z=4,
                                   info_pivots=sel, z_max=20, aa_step=1)
        objs = [h["objective"] for h in res.history]
        assert all(b <= a + 1e-8 for a, b in zip(objs, objs[1:]))
        assert math.isclose(res.objective, float(model.objective().detach()), rel_tol=1e-8)
        zs = [h["z"] for h in res.history[1:] if "z" in h]
        if sel == "aa":
            assert zs == sorted(zs) and 4 <= zs[0] and zs[-1] <= 20
            grown = zs[-1] - 4  # one pivot per rejected attempt, until z_max
            rejected = sum(h["attempts"] - h["accepted"] for h in res.history[1:])
            assert grown == min(rejected, 16) and grown > 0
        else:
            assert zs == []
    with pytest.raises(ValueError, match="info_pivots"):
        cq.fit_cholqr(X, y, kern, 8, info_pivots="csi")
    with pytest.raises(ValueError, match="z_max"):
        cq.fit_cholqr(X, y, kern, 8, info_pivots="aa", z=32, z_max=16)
    with pytest.raises(ValueError, match="aa_step"):
        cq.fit_cholqr(X, y, kern, 8, info_pivots="aa", aa_step=0)
    with pytest.raises(ValueError, match="select"):
        InfoPivots(CholQRFactors(kern, X, y, [0], 0.1), 4, torch.Generator(), select="x")


def test_cholqr_options_reach_the_fit():
    from gpscale.methods.cholqr import CholQROptions

    assert CholQROptions().info_pivots == "random" and CholQROptions().z_max == 128
    with pytest.raises(ValueError, match="info_pivots"):
        CholQROptions(info_pivots="OI")
    X, y, _ = _problem(80, 1, 36)
    import gpscale

    pred = gpscale.fit(X.numpy(), y.numpy(), method="cholqr-vfe", m=8, max_epochs=2,
                       info_pivots="aa", z=2, z_max=6)
    assert pred.model.m == 8


def test_bench_variant_names():
    from benchmarks.cholqr_discrete import cholqr_variant

    assert cholqr_variant("cholqr") == {"info_pivots": "random", "z": 16}
    assert cholqr_variant("cholqr-z128") == {"info_pivots": "random", "z": 128}
    assert cholqr_variant("cholqr-oi-z64") == {"info_pivots": "oi", "z": 64}
    assert cholqr_variant("cholqr-aa-z8-128") == {"info_pivots": "aa", "z": 8, "z_max": 128}
    assert cholqr_variant("cholqr-aa-z8-128-s1") == {"info_pivots": "aa", "z": 8,
                                                     "z_max": 128, "aa_step": 1}
    assert cholqr_variant("cholqr-aa-z8") is None and cholqr_variant("titsias-16") is None
    assert cholqr_variant("cholqr-oi-z8-64") is None
