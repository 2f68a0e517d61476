"""Helpers of the CG solver's tests: its stochastic NLML gradient is unbiased; a model's
hyperparameters moved onto the CG solver."""

import math

import torch

from gpscale.models.exact_cg_gradient import StochasticGradient


def assert_unbiased_gradient(model, want: torch.Tensor, draws: int = 16,
                             probes: int = 32) -> None:
    """The mean of ``draws`` independent estimates of ``model``'s NLML gradient (each
    with ``probes`` probes from its preconditioner, CG converged) lies within four
    standard errors of ``want`` (the dense gradient, parameters in ``model``'s order)
    in every parameter; the data-fit-only parameter, the constant mean, is exact; and
    the standard errors are small enough for the check to have teeth."""
    params = [p for p in model.parameters() if p.requires_grad]
    estimates = []
    for seed in range(draws):
        grads, info = StochasticGradient(model, probes, seed)()
        assert info["converged"]
        estimates.append(torch.cat([grads[p].reshape(-1) for p in params]))
    E = torch.stack(estimates)
    mean, se = E.mean(0), E.std(0) / math.sqrt(E.shape[0])
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    i_mean = names.index("mean_constant")
    torch.testing.assert_close(mean[i_mean], want[i_mean], rtol=1e-7, atol=1e-8)
    assert bool(((mean - want).abs() <= 4 * se + 1e-9).all()), (mean, want, se)
    assert float(se.max()) < 0.05 * float(want.abs().max())


def cg_model(exact, X=None, y=None, *, solve: bool = True, noise_floor=None, **options):
    """``exact``'s hyperparameters on the rows X, y (default its own) with the CG solver of
    ``options``, solved unless ``solve=False``."""
    from gpscale.models import ConjugateGradients

    extra = {} if "copies" not in options else {"copies": options.pop("copies")}
    model = exact.with_solver(ConjugateGradients(**options), X, y, noise_floor=noise_floor,
                              **extra)
    if solve:
        model.solve()
    return model
