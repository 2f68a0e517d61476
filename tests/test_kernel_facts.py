"""Kernels own their facts: each kernel class says which spectral density the feature
methods can use (or none), registers itself by name so that a user's kernel saves and
loads, and the feature methods start from the kernel's own lengthscales and signal
variance."""

import math
import warnings

import numpy as np
import pytest
import torch

import gpscale
from gpscale.features import FeatureKernel
from gpscale.kernels import (
    KERNEL_CLASSES,
    KERNELS,
    RBF,
    Kernel,
    Matern,
    Scale,
    SpectralDensity,
    Stationary,
    from_config,
    kernel_class,
    make_kernel,
    spectral_facts,
)
from gpscale.kernels.spectral import spectral_names
from gpscale.params import Positive

D64 = torch.float64

#: the spectral density name of every named kernel (None: the feature methods refuse it)
EXPECTED = {"rbf": "rbf", "rbf-ard": "rbf", "matern12-ard": "matern12",
            "matern32-ard": "matern32", "matern52-ard": "matern52"}


class GammaExponential(Kernel):
    """A user's kernel: k(x, x') = exp(−(‖x − x'‖₁ / l)^γ), γ ∈ (0, 2] a fixed shape (a
    constructor argument saved in the config), l a learned Positive parameter."""

    lengthscale = Positive(doc="lengthscale l")

    def __init__(self, lengthscale: float = 1.0, gamma: float = 1.0,
                 active_dims: list[int] | None = None) -> None:
        super().__init__(active_dims)
        self.gamma = float(gamma)
        self.lengthscale = lengthscale

    def _k(self, X1, X2):
        r = (X1[:, None, :] - X2[None, :, :]).abs().sum(-1) / self.lengthscale
        return torch.exp(-r.clamp_min(1e-30).pow(self.gamma))

    def _diag(self, X):
        return torch.ones(X.shape[0], dtype=X.dtype, device=X.device)

    def _config_args(self):
        return {"gamma": self.gamma}


def _data(n=120, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.1 * rng.normal(size=n)
    return X, y


# -- spectral facts of the built-in kernels ------------------------------------------------
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_every_named_kernel_says_its_spectral_density(name):
    k = make_kernel(name, 3)
    density = k.spectral_density()
    assert (None if density is None else density.name) == EXPECTED.get(name)
    if density is None:
        with pytest.raises(ValueError, match="RBF or Matérn"):
            spectral_facts(k, "rff")
    else:
        facts = spectral_facts(k, "rff", 3)
        assert facts.name == EXPECTED[name] and facts.ard == name.endswith("-ard")


def test_every_builtin_kernel_class_answers():
    assert RBF().spectral_density() == SpectralDensity("rbf")
    for nu in (0.5, 1.5, 2.5):
        assert Matern(nu).spectral_density() == SpectralDensity("matern", nu)
    builtin = {c for c in KERNEL_CLASSES.values() if c.__module__.startswith("gpscale.")}
    assert {"RBF", "Matern", "Scale", "Sum", "Product", "Periodic", "Tanimoto",
            "FeatureKernel"} <= {c.__name__ for c in builtin}
    for cls in builtin - {RBF, Matern, Scale}:
        # only RBF and Matérn (and Scale around them) have a density the features sample
        assert cls.spectral_density is Kernel.spectral_density, cls
    assert Scale(Scale(Matern(1.5))).spectral_density().name == "matern32"
    assert (RBF() * RBF()).spectral_density() is None
    assert (RBF() + RBF()).spectral_density() is None


def test_spectral_density_names_round_trip():
    assert spectral_names() == ("rbf", "matern12", "matern32", "matern52")
    for name in spectral_names():
        assert SpectralDensity.from_name(name).name == name
    assert SpectralDensity.from_name("matern52").nu == 2.5
    for bad in ("cosine", "matern72", "matern", 3):
        with pytest.raises(ValueError, match="unknown spectral density"):
            SpectralDensity.from_name(bad)
    with pytest.raises(ValueError, match="nu"):
        SpectralDensity("matern", 0.7)
    with pytest.raises(ValueError, match="family"):
        SpectralDensity("laplace")


def test_spectral_facts_values_and_errors():
    k = Scale(Scale(RBF([2.0, 3.0], ard_dims=2), 4.0), 0.5)
    facts = spectral_facts(k, "rff", 2)
    assert facts.ard and facts.name == "rbf"
    torch.testing.assert_close(facts.lengthscale, torch.tensor([2.0, 3.0], dtype=D64))
    assert math.isclose(facts.outputscale, 2.0, rel_tol=1e-12)
    assert facts.given().keys() == {"lengthscale", "outputscale"}
    plain = spectral_facts(Matern(0.5), "rff")
    assert not plain.ard and plain.outputscale == 1.0 and plain.lengthscale.shape == (1,)
    assert plain.given() == {}  # a default kernel gives no start of its own
    with pytest.raises(ValueError, match="ard_dims=2"):
        spectral_facts(RBF(1.0, ard_dims=3), "rff", 2)
    with pytest.raises(ValueError, match="RBF or Matérn"):
        spectral_facts(make_kernel("periodic", 1), "grief-ii")

    class NotStationary(Kernel):
        def spectral_density(self):
            return SpectralDensity("rbf")

    with pytest.raises(ValueError, match="Stationary"):
        spectral_facts(Scale(NotStationary()), "rff")
    KERNEL_CLASSES.pop("NotStationary")


# -- registration: a user's kernel saves and loads ------------------------------------------
def test_user_kernel_round_trips_through_save_and_load(tmp_path):
    assert kernel_class("GammaExponential") is GammaExponential
    X, y = _data()
    kernel = Scale(GammaExponential(0.8, gamma=1.5))
    pred = gpscale.fit(X, y, method="exact", kernel=kernel, max_iter=20)
    path = pred.save(tmp_path / "user.pt")
    loaded = gpscale.load(path)
    assert isinstance(loaded.model.kernel.base, GammaExponential)
    assert loaded.model.kernel.base.gamma == 1.5
    mean, std = pred.predict(X[:30], return_std=True)
    mean2, std2 = loaded.predict(X[:30], return_std=True)
    np.testing.assert_allclose(mean2, mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(std2, std, rtol=1e-12, atol=1e-12)
    KERNEL_CLASSES.pop("GammaExponential")  # as in a session that never defined it
    try:
        with pytest.raises(ValueError, match="GammaExponential.*define \\(import\\)"):
            gpscale.load(path)
    finally:
        KERNEL_CLASSES["GammaExponential"] = GammaExponential


def test_unknown_and_unrebuildable_kernel_types_say_what_to_do():
    with pytest.raises(ValueError, match="define \\(import\\) the kernel class"):
        from_config({"type": "NoSuchKernel", "args": {}})
    with pytest.raises(ValueError, match="must accept"):
        from_config({"type": "GammaExponential", "args": {"shape": 2.0}})
    rff = gpscale.features.RandomFourierFeatures(2, 8)
    with pytest.raises(ValueError, match="FeatureKernel"):
        from_config(FeatureKernel(rff).config())


def test_a_builtin_name_cannot_be_taken_by_another_class():
    with pytest.raises(TypeError, match="belongs to gpscale"):
        class RBF(Kernel):  # noqa: F811 - the clash is the point
            pass
    assert KERNEL_CLASSES["RBF"].__module__ == "gpscale.kernels.stationary"

    class MyRBF(gpscale.kernels.RBF, name="tests.RBF"):
        """Same covariance, registered under its own name."""

    k = Scale(MyRBF([0.5, 2.0], ard_dims=2), 1.7)
    assert k.config()["children"][0]["type"] == "tests.RBF"
    twin = from_config(k.config())
    twin.load_state_dict(k.state_dict())
    assert type(twin.base) is MyRBF
    X = torch.randn(5, 2, dtype=D64)
    torch.testing.assert_close(twin(X), k(X))
    assert spectral_facts(k, "rff").name == "rbf"  # subclasses keep their facts
    KERNEL_CLASSES.pop("tests.RBF")


def _define(tag):
    class Local(Stationary):
        def _k(self, X1, X2):
            return torch.exp(-self.r2(X1, X2)) * tag

    return Local


def test_user_names_go_to_the_newest_definition():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # redefining the same class (same scope): silent
        first = _define(1.0)
        again = _define(2.0)
    assert KERNEL_CLASSES["Local"] is again and first is not again

    with pytest.warns(UserWarning, match="instead of"):
        class Local(Stationary):
            pass
    assert KERNEL_CLASSES["Local"] is Local
    KERNEL_CLASSES.pop("Local")


# -- the feature methods start from the kernel's values ---------------------------------------
def test_rff_keeps_the_users_initial_lengthscales():
    """Issue 29: rff started from lengthscale 1 whatever the kernel said (1.41 / 1.29
    after one iteration where exact stays near 5)."""
    X, y = _data(200)
    kernel = Scale(RBF(5.0, ard_dims=2))
    pred = gpscale.fit(X, y, method="rff", kernel=kernel, max_iter=1, num_features=128)
    ls = pred.model.features.lengthscale.detach()
    exact = gpscale.fit(X, y, method="exact", kernel=Scale(RBF(5.0, ard_dims=2)), max_iter=1)
    ls_exact = exact.model.kernel.base.lengthscale.detach()
    assert torch.all((ls > 3.0) & (ls < 7.0)), ls
    torch.testing.assert_close(ls, ls_exact, rtol=0.25, atol=0.0)


def test_rff_starts_from_the_signal_variance(monkeypatch):
    """The FeatureGP weight (W = s² I) starts at the kernel's outputscale: seen by the
    first likelihood evaluation."""
    from gpscale.models import FeatureGP

    seen = []
    original = FeatureGP.nlml

    def spy(self, *args, **kwargs):
        seen.append(float(self.weight.detach().reshape(-1)[0]))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(FeatureGP, "nlml", spy)
    X, y = _data(60)
    gpscale.fit(X, y, method="rff", kernel=Scale(RBF(2.0), 3.5), max_iter=1, num_features=16)
    assert seen and math.isclose(seen[0], 3.5, rel_tol=1e-12), seen


def test_minibatch_rff_features_start_from_the_kernel():
    X, y = _data(100)
    kernel = Scale(Matern(1.5, [2.0, 3.0], ard_dims=2), 4.0)
    pred = gpscale.fit(X, y, method="bsgd", kernel=kernel, num_features=16, epochs=1,
                       batch_size=50, lr=1e-12)
    feats = pred.model.features
    assert feats.base.kernel == "matern32"
    torch.testing.assert_close(feats.base.lengthscale.detach(),
                               torch.tensor([2.0, 3.0], dtype=D64), rtol=1e-6, atol=0.0)
    assert math.isclose(float(feats.outputscale.detach()), 4.0, rel_tol=1e-6)


def test_grief_starts_its_initialisation_from_given_values(monkeypatch):
    import gpscale.methods.grief as grief_method

    class Stop(Exception):
        pass

    seen = {}

    def capture(*args, **kwargs):
        seen.update(kwargs)
        raise Stop

    monkeypatch.setattr(grief_method, "fit_grief_ii", capture)
    X, y = _data(50)
    with pytest.raises(Stop):
        gpscale.fit(X, y, method="grief-ii", kernel=Scale(RBF(5.0, ard_dims=2), 2.0))
    assert seen["kernel"] == "rbf"
    torch.testing.assert_close(seen["start"]["lengthscale"], torch.tensor([5.0, 5.0],
                                                                          dtype=D64))
    assert math.isclose(seen["start"]["outputscale"], 2.0, rel_tol=1e-12)
    seen.clear()
    with pytest.raises(Stop):
        gpscale.fit(X, y, method="grief-ii", kernel="matern52-ard")
    assert seen["kernel"] == "matern52" and seen["start"] == {}


def test_grief_initialisation_start():
    from gpscale.train.grief import init_exact

    gen = torch.Generator().manual_seed(0)
    X = torch.randn(60, 2, generator=gen, dtype=D64)
    y = torch.sin(2 * X[:, 0]) + 0.1 * torch.randn(60, generator=gen, dtype=D64)
    base = init_exact(X, y, "rbf", max_iter=5)
    same = init_exact(X, y, "rbf", max_iter=5, start={})
    for key in base:
        assert torch.equal(base[key], same[key])
    moved = init_exact(X, y, "rbf", max_iter=1, start={"lengthscale": torch.tensor([30.0]),
                                                       "outputscale": 0.01})
    assert not torch.allclose(moved["lengthscale"], base["lengthscale"], rtol=1e-3)
    with pytest.raises(ValueError, match="3 values for 2 input columns"):
        init_exact(X, y, "rbf", max_iter=1, start={"lengthscale": torch.ones(3)})
