import math

import pytest
import torch

from gpscale import ExactGP
from gpscale.kernels import make_kernel
from gpscale.methods.exact import fit_exact
from gpscale.priors import Gamma, LogNormal, botorch_priors, resolve_priors


def _t(x):
    return torch.tensor(x, dtype=torch.float64)


def _v():
    return torch.tensor([1e-3, 0.2, 1.0, 3.7, 250.0], dtype=torch.float64)


@pytest.mark.parametrize("prior,ref", [
    (LogNormal(0.3, 1.7), torch.distributions.LogNormal(_t(0.3), _t(1.7))),
    (LogNormal(-4.0, 1.0), torch.distributions.LogNormal(_t(-4.0), _t(1.0))),
    (Gamma(3.0, 6.0), torch.distributions.Gamma(torch.tensor(3.0, dtype=torch.float64),
                                                 torch.tensor(6.0, dtype=torch.float64))),
])
def test_log_densities_match_torch_distributions(prior, ref):
    v = _v()
    torch.testing.assert_close(prior.log_prob(v), ref.log_prob(v), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("prior", [LogNormal(0.3, 1.7), Gamma(3.0, 6.0)])
def test_log_density_gradients(prior):
    v = _v().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: prior.log_prob(t), (v,), eps=1e-7, atol=1e-7)


def test_modes():
    assert LogNormal(0.5, 0.4).mode() == pytest.approx(math.exp(0.5 - 0.16), rel=1e-14)
    assert Gamma(3.0, 6.0).mode() == pytest.approx(2.0 / 6.0, rel=1e-14)


def test_botorch_priors_are_botorchs():
    p = botorch_priors(7)
    assert p["lengthscale"].loc == pytest.approx(math.sqrt(2) + 0.5 * math.log(7), rel=1e-15)
    assert p["lengthscale"].scale == pytest.approx(math.sqrt(3), rel=1e-15)
    assert (p["noise"].loc, p["noise"].scale) == (-4.0, 1.0)
    gm = pytest.importorskip("botorch.models.utils.gpytorch_modules")
    ls = gm.get_covar_module_with_dim_scaled_prior(ard_num_dims=7).lengthscale_prior
    nz = gm.get_gaussian_likelihood_with_lognormal_prior().noise_covar.noise_prior
    v = _v()  # BoTorch stores loc and scale in float32: agreement to float32 rounding
    torch.testing.assert_close(p["lengthscale"].log_prob(v), ls.double().log_prob(v),
                               rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(p["noise"].log_prob(v), nz.double().log_prob(v),
                               rtol=1e-6, atol=1e-6)
    assert float(ls.loc) == pytest.approx(p["lengthscale"].loc, rel=1e-7)


def _model(d=3):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(30, d, generator=g, dtype=torch.float64)
    y = torch.sin(X[:, 0]) + 0.1 * torch.randn(30, generator=g, dtype=torch.float64)
    model = ExactGP(make_kernel("rbf-ard", d), X, y, noise=0.2)
    model.kernel.base.lengthscale = torch.tensor([0.5, 1.5, 3.0], dtype=torch.float64)
    return model


def test_prior_term_is_minus_log_density_of_the_constrained_values_and_its_raw_gradient():
    model = _model()
    term = resolve_priors(model, "botorch", d=3)
    pri = botorch_priors(3)
    ls, noise = model.kernel.base.lengthscale.detach(), model.noise.detach()
    want = -(pri["lengthscale"].log_prob(ls).sum() + pri["noise"].log_prob(noise).sum())
    value = term()
    torch.testing.assert_close(value, want, rtol=1e-13, atol=1e-13)
    value.backward()
    # chain rule through v = floor + softplus(raw): d/draw = d/dv · sigmoid(raw); no Jacobian
    raw = model.kernel.base.raw_lengthscale
    lsr = ls.clone().requires_grad_(True)
    (-pri["lengthscale"].log_prob(lsr).sum()).backward()
    torch.testing.assert_close(raw.grad, lsr.grad * torch.sigmoid(raw.detach()),
                               rtol=1e-12, atol=1e-14)
    # gradcheck of the whole term in the raw parameters
    raws = (model.kernel.base.raw_lengthscale, model.raw_noise)

    def f(a, b):
        with torch.no_grad():
            raws[0].copy_(a.detach())
            raws[1].copy_(b.detach())
        return pri["lengthscale"].log_prob(1e-6 + torch.nn.functional.softplus(a)).sum() + \
            pri["noise"].log_prob(1e-6 + torch.nn.functional.softplus(b)).sum()

    a = raws[0].detach().clone().requires_grad_(True)
    b = raws[1].detach().clone().requires_grad_(True)
    assert torch.autograd.gradcheck(f, (a, b), eps=1e-7, atol=1e-7)


def test_user_priors_by_attribute_or_qualified_name_and_errors():
    model = _model()
    t1 = resolve_priors(model, {"outputscale": Gamma(2.0, 1.0)})
    t2 = resolve_priors(model, {"kernel.outputscale": Gamma(2.0, 1.0)})
    assert t1.describe() == t2.describe() == {"kernel.outputscale": "Gamma(concentration=2, "
                                                                    "rate=1)"}
    torch.testing.assert_close(t1(), -Gamma(2.0, 1.0).log_prob(model.kernel.outputscale).sum())
    assert not resolve_priors(model, None)
    with pytest.raises(ValueError, match="match no parameter"):
        resolve_priors(model, {"lengthscal": Gamma(2.0, 1.0)})
    with pytest.raises(ValueError, match="Prior"):
        resolve_priors(model, {"noise": 0.3})
    with pytest.raises(ValueError, match="prior must be"):
        resolve_priors(model, "gpytorch")
    with pytest.raises(ValueError):
        LogNormal(0.0, -1.0)


def test_fit_exact_map_minimises_nlml_plus_prior():
    model = _model()
    X, y = model.X, model.y
    fitted, res = fit_exact(X, y, make_kernel("rbf-ard", 3), prior="botorch")
    term = resolve_priors(fitted, "botorch", d=3)
    with torch.no_grad():
        want = float(fitted.nlml() + term())
    assert res.objective == pytest.approx(want, rel=1e-10)
    ml2, res2 = fit_exact(X, y, make_kernel("rbf-ard", 3), prior=None)
    with torch.no_grad():
        assert float(fitted.nlml()) >= float(ml2.nlml()) - 1e-6  # ML-II has the best NLML
        assert float(ml2.nlml() + resolve_priors(ml2, "botorch", d=3)()) >= res.objective - 1e-6
