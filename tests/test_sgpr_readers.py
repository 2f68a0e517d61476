"""One SGPR, its rows read three ways (models.sgpr: HeldRows, RowPasses, Statistics):
each reader's bound and gradient equal the dense O(n³) Titsias bound's (autograd through
the dense formula on the same parameters), float64, small n; their sums and posteriors
agree; freezing, saving and loading keep the predictions."""

import pytest
import torch
from test_sgpr import dense_vfe

from gpscale.io.rows import Rows, TensorPartition
from gpscale.kernels import RBF, Linear, Scale
from gpscale.models import SGPR, StreamedSGPR
from gpscale.models.sgpr import HeldRows, RowPasses, Statistics


def _problem(n=41, d=2, m=7, seed=11):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=torch.float64) * 4
    y = torch.sin(X.sum(1)) + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    Z = torch.rand(m, d, generator=g, dtype=torch.float64) * 4
    return X, y, Z


def _kernel():
    return Scale(RBF([0.9, 1.3], ard_dims=2), 1.4)


def _passes(X, y, sizes=(15, 19, 7), chunk=6):
    parts, s = [], 0
    for k in sizes:
        parts.append(TensorPartition(X[s : s + k], y[s : s + k]))
        s += k
    return Rows(tuple(parts), X.shape[1], rows=chunk)


def _readers(X, y, Z, noise=0.05):
    """A model per reader at one θ, Z and σ² (separate parameters)."""
    frozen = SGPR(_kernel(), X, y, Z, noise=noise).freeze(statistics=True)
    return {"held": SGPR(_kernel(), X, y, Z, noise=noise),
            "held (reader)": SGPR(_kernel(), Z=Z, rows=HeldRows(X, y), noise=noise),
            "passes": SGPR(_kernel(), Z=Z, rows=RowPasses(_passes(X, y)), noise=noise),
            "passes (Rows)": SGPR(_kernel(), Z=Z, rows=_passes(X, y), noise=noise),
            "StreamedSGPR": StreamedSGPR(_kernel(), Z, rows=_passes(X, y), noise=noise),
            "statistics": frozen}


def _grads(model, dense: bool, X, y):
    """F and its gradient in every trained parameter: the model's objective, or the dense
    O(n³) formula on the model's own kernel, Z and σ²."""
    model.zero_grad()
    if dense:
        k = model.kernel
        F = dense_vfe(k(X), k(X, model.Z), k(model.Z), y, model.noise)
    else:
        F = model.objective()
    F.backward()
    return F.detach(), {k: p.grad.clone() for k, p in model.named_parameters()
                        if p.grad is not None}


def test_every_reader_gives_the_dense_bound_and_gradient():
    X, y, Z = _problem()
    for name, model in _readers(X, y, Z).items():
        F, grads = _grads(model, False, X, y)
        F_dense, dense = _grads(model, True, X, y)
        torch.testing.assert_close(F, F_dense, rtol=1e-10, atol=0, msg=name)
        trained = {"raw_noise"} if name == "statistics" else {
            "raw_noise", "Z", "kernel.raw_outputscale", "kernel.base.raw_lengthscale"}
        assert set(grads) == set(dense) == trained, name
        for p in grads:
            torch.testing.assert_close(grads[p], dense[p], rtol=1e-8,
                                       atol=1e-8 * dense[p].abs().max(), msg=f"{name} {p}")


def test_readers_give_one_set_of_sums_and_one_posterior():
    X, y, Z = _problem(seed=12)
    models = _readers(X, y, Z)
    Xs = torch.rand(13, 2, dtype=torch.float64) * 4
    with torch.no_grad():
        ref_stats = models["held"].statistics()
        ref = models["held"].predict(Xs, include_noise=True)
        for name, model in models.items():
            stats = model.statistics()
            assert stats[3] == 41 and model.n == 41 and model.m == 7, name
            for a, b in zip(stats[:3], ref_stats[:3]):
                torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12, msg=name)
            for a, b in zip(model.predict(Xs, include_noise=True), ref):
                torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12, msg=name)


def test_each_reader_keeps_its_parameter_order():
    """The order of L-BFGS's vector, which each path's rounding depends on."""
    X, y, Z = _problem()
    models = _readers(X, y, Z)
    with torch.no_grad():
        models["sums"] = SGPR(_kernel(), Z=Z, rows=Statistics(*models["held"].statistics()))
    order = {name: [k for k, _ in m.named_parameters()][:2] for name, m in models.items()}
    assert order["held"] == order["held (reader)"] == ["raw_noise", "Z"]
    assert order["passes"] == order["StreamedSGPR"] == order["sums"] == ["Z", "raw_noise"]
    assert order["statistics"] == ["raw_noise", "Z"]  # frozen later: registered as held


def test_freeze_keeps_held_rows_and_turns_passes_into_sums():
    X, y, Z = _problem(seed=13)
    held = SGPR(_kernel(), X, y, Z)
    assert held.freeze() is held and isinstance(held.reader, HeldRows) and "X" in held.state_dict()
    passes = SGPR(_kernel(), Z=Z, rows=_passes(X, y))
    assert passes.rows is not None
    passes.freeze()
    assert isinstance(passes.reader, Statistics) and passes.rows is None
    assert not passes.Z.requires_grad and passes.n == 41


def test_a_held_model_saved_as_its_sums_loads_to_the_same_predictions():
    X, y, Z = _problem(seed=14)
    held = SGPR(_kernel(), X, y, Z, noise=0.08)
    Xs = torch.rand(9, 2, dtype=torch.float64) * 4
    before = held.predict(Xs)
    held.freeze(statistics=True)
    state, config = held.saved_state(), held.to_config()
    assert "X" not in state and "y" not in state and config["rows"] == "statistics"
    again = SGPR.from_config(config, dict(state), _kernel())
    again.load_state_dict(state)
    for a, b in zip(again.predict(Xs), before):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_refusals():
    X, y, Z = _problem()
    with pytest.raises(ValueError, match="not both"):
        SGPR(_kernel(), X, y, Z, rows=_passes(X, y))
    with pytest.raises(ValueError, match="X, y"):
        SGPR(_kernel(), Z=Z)
    with pytest.raises(ValueError, match="inducing inputs Z"):
        SGPR(_kernel(), X, y)
    with pytest.raises(ValueError, match="columns but the rows have"):
        SGPR(_kernel(), Z=Z[:, :1], rows=_passes(X, y))
    held = SGPR(Linear(), X, y, Z)  # any kernel while the rows are held
    with pytest.raises(ValueError, match="needs a stationary kernel"):
        held.freeze(statistics=True)
    with pytest.raises(ValueError, match="needs a stationary kernel"):
        SGPR(Linear(), Z=Z, rows=Statistics(*held.statistics()))
