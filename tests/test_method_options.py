"""Each method's options are one typed dataclass, checked in ``__post_init__``, that its
fit function takes (:func:`gpscale.methods.options.takes_options`): ``gpscale methods``,
``--option NAME=VALUE``, ``gpscale.fit(..., NAME=...)`` and the estimator read it."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest
import torch

import gpscale
from gpscale.commands.methods import method_options
from gpscale.methods import METHODS
from gpscale.methods.grief import GriefIOptions, GriefOptions
from gpscale.methods.options import option_defaults, options_class, parse_option
from gpscale.methods.rff import RFFOptions
from gpscale.methods.sgpr import SGPROptions
from gpscale.methods.spgp import SPGPOptions
from gpscale.methods.stochastic import BSGDOptions, MinimaxOptions, SCGDOptions
from gpscale.methods.svgp import SVGPOptions
from gpscale.train.stochastic import fit_bsgd, fit_minimax, fit_scgd

#: the options, in order, with their defaults' repr, that ``gpscale methods`` showed for
#: these methods before their options became dataclasses
TODAY = {
    "rff": (
        ("num_features", "512"), ("noise", "0.1"), ("max_iter", "200"), ("seed", "0"),
        ("subsample", "'auto'"), ("refine", "0"), ("progress", "False"),
        ("device", "None"), ("dtype", "torch.float64"), ("time_limit", "None"),
    ),
    "sgpr": (
        ("m", "None"), ("noise", "0.1"), ("init", "'kmeans'"), ("max_iter", "200"),
        ("tol", "0.0001"), ("patience", "3"), ("warm_rows", "None"), ("init_rows", "1000"),
        ("learn_z", "True"), ("seed", "0"), ("passes", "'auto'"), ("subsample", "20000"),
        ("refine", "20"), ("progress", "False"), ("device", "None"),
        ("dtype", "torch.float64"), ("time_limit", "None"),
    ),
    "spgp": (
        ("m", "None"), ("noise", "0.1"), ("init", "'random'"), ("start", "'snelson'"),
        ("max_iter", "200"), ("tol", "0.0001"), ("patience", "3"), ("learn_z", "True"),
        ("seed", "0"), ("progress", "False"), ("device", "None"),
        ("dtype", "torch.float64"), ("time_limit", "None"),
    ),
    "svgp": (
        ("num_inducing", "None"), ("batch_size", "None"), ("epochs", "None"),
        ("lr", "None"), ("lr_schedule", "'constant'"), ("optimizer", "'adam'"),
        ("seed", "0"), ("noise", "0.1"), ("progress", "False"), ("device", "None"),
        ("buffer_rows", "None"), ("dtype", "torch.float64"),
    ),
    "minimax": (
        ("features", "None"), ("num_features", "None"), ("seed", "0"), ("noise", "0.1"),
        ("batch_size", "32"), ("epochs", "10"), ("optimizer", "'adadelta'"),
        ("lr", "None"), ("lr_schedule", "'constant'"), ("eval_every", "None"),
        ("max_time", "None"), ("progress", "False"), ("device", "None"),
        ("buffer_rows", "None"), ("lr_max", "None"), ("mu", "1.0"), ("mu_growth", "1.0"),
        ("mu_max", "1000000.0"), ("noise_min", "0.0001"), ("zeta_max", "None"),
    ),
    "scgd": (
        ("features", "None"), ("num_features", "None"), ("seed", "0"), ("noise", "0.1"),
        ("batch_size", "32"), ("epochs", "10"), ("optimizer", "'adadelta'"),
        ("lr", "None"), ("lr_schedule", "'constant'"), ("eval_every", "None"),
        ("max_time", "None"), ("progress", "False"), ("device", "None"),
        ("buffer_rows", "None"), ("b", "0.9"), ("b0", "1.0"), ("tracker", "'same'"),
    ),
    "bsgd": (
        ("features", "None"), ("num_features", "None"), ("seed", "0"), ("noise", "0.1"),
        ("batch_size", "32"), ("epochs", "10"), ("optimizer", "'adadelta'"),
        ("lr", "None"), ("lr_schedule", "'constant'"), ("eval_every", "None"),
        ("max_time", "None"), ("progress", "False"), ("device", "None"),
        ("buffer_rows", "None"),
    ),
    "grief-ii": (
        ("num_features", "None"), ("m_bar", "10"), ("max_iter", "100"), ("seed", "0"),
        ("progress", "False"), ("grid", "'quantile'"), ("device", "None"),
    ),
    "grief-i": (
        ("num_features", "1000"), ("m_bar", "10"), ("n_iter", "10000"), ("burn", "1000"),
        ("thin", "50"), ("seed", "0"), ("progress", "False"), ("grid", "'quantile'"),
        ("basis", "'eigen'"), ("fill_grid", "True"), ("device", "None"),
    ),
}

CLASSES = {"rff": RFFOptions, "sgpr": SGPROptions, "spgp": SPGPOptions, "svgp": SVGPOptions,
           "minimax": MinimaxOptions, "scgd": SCGDOptions, "bsgd": BSGDOptions,
           "grief-ii": GriefOptions, "grief-i": GriefIOptions}


@pytest.mark.parametrize("name", sorted(TODAY))
def test_every_door_sees_the_options_and_defaults_of_before(name):
    method = METHODS[name]
    assert options_class(method) is CLASSES[name]
    shown = [(k, repr(v)) for k, v in method_options(method).items()]
    assert shown == list(TODAY[name])  # gpscale methods
    assert [(k, repr(v)) for k, v in option_defaults(method).items()] == list(TODAY[name])
    assert set(method.options) == {k for k, _ in TODAY[name]}  # what fit / --option take
    params = list(inspect.signature(method.fit_fn).parameters.values())[3:]
    assert [(p.name, repr(p.default)) for p in params] == list(TODAY[name])


@pytest.mark.parametrize("cls,trainer", [(MinimaxOptions, fit_minimax),
                                         (SCGDOptions, fit_scgd), (BSGDOptions, fit_bsgd)])
def test_the_stochastic_defaults_are_the_trainers(cls, trainer):
    given = cls().trainer_options()
    params = inspect.signature(trainer).parameters
    assert {k: params[k].default for k in given} == given


@pytest.mark.parametrize("cls,options,says", [
    (RFFOptions, {"num_features": 1}, "num_features must be an integer >= 2"),
    (RFFOptions, {"subsample": "some"}, "subsample must be an integer"),
    (RFFOptions, {"time_limit": -1.0}, "time"),
    (SGPROptions, {"passes": "always"}, "passes must be 'auto', True or False"),
    (SGPROptions, {"init": "grid"}, "init must be 'random', 'kmeans'"),
    (SGPROptions, {"m": 0}, "m must be an integer >= 1"),
    (SGPROptions, {"tol": -1.0}, "tol must be a non-negative number"),
    (SPGPOptions, {"start": "data"}, "start must be 'snelson' or 'given'"),
    (SPGPOptions, {"init": "grid"}, "init must be one of"),
    (SPGPOptions, {"noise": 0.0}, "noise must be a positive"),
    (SVGPOptions, {"optimizer": "rmsprop"}, "optimizer='rmsprop' is not one of"),
    (SVGPOptions, {"lr_schedule": "step"}, "lr_schedule='step' is not one of"),
    (SVGPOptions, {"num_inducing": 0}, "num_inducing must be an integer >= 1"),
    (MinimaxOptions, {"mu": "big"}, "mu must be a positive"),
    (MinimaxOptions, {"features": "nn"}, "features must be one of"),
    (MinimaxOptions, {"batch_size": 2.5}, "batch_size must be a positive integer"),
    (MinimaxOptions, {"epochs": 0}, "epochs must be a positive"),
    (SCGDOptions, {"b": 1.5}, "b must be in \\(0, 1\\]"),
    (SCGDOptions, {"tracker": "other"}, "tracker must be 'same' or 'independent'"),
    (BSGDOptions, {"max_time": -1}, "max_time must be a number of seconds >= 0"),
    (GriefOptions, {"grid": "random"}, "unknown GRIEF grid"),
    (GriefOptions, {"m_bar": 0}, "m_bar must be an integer >= 1"),
    (GriefIOptions, {"burn": 100, "n_iter": 100}, "burn=100 must be smaller than n_iter"),
    (GriefIOptions, {"basis": "other"}, "basis must be 'eigen'"),
])
def test_each_options_class_says_what_is_wrong(cls, options, says):
    with pytest.raises(ValueError, match=says):
        cls(**options)


def test_the_options_classes_take_their_defaults_and_accepted_values():
    for cls in CLASSES.values():
        cls()  # the defaults pass their own checks
    assert MinimaxOptions(mu="auto", features="NN-RBF", batch_size=16.0).mu == "auto"
    assert SCGDOptions(b=None, max_time=0).b is None
    assert SPGPOptions(init=torch.zeros(3, 2)).init.shape == (3, 2)  # given pseudo-inputs
    assert RFFOptions(dtype="float32").dtype is torch.float32
    with pytest.raises(TypeError, match="bogus"):
        RFFOptions(bogus=1)


def test_option_text_is_parsed_by_the_fields_type():
    minimax, sgpr = METHODS["minimax"], METHODS["sgpr"]
    assert parse_option(minimax, "epochs=0.5") == ("epochs", 0.5)
    assert parse_option(minimax, "epochs=3") == ("epochs", 3.0)
    assert parse_option(minimax, "mu=auto") == ("mu", "auto")
    assert parse_option(minimax, "lr=None") == ("lr", None)
    assert parse_option(minimax, "lr=0.5") == ("lr", 0.5)
    assert parse_option(sgpr, "tol=None") == ("tol", None)
    assert parse_option(sgpr, "passes=False") == ("passes", False)
    assert parse_option(METHODS["scgd"], "tracker=independent") == ("tracker", "independent")
    with pytest.raises(ValueError, match="must be of type int"):
        parse_option(minimax, "batch_size=1.5")
    with pytest.raises(ValueError, match="must be of type int or None"):
        parse_option(sgpr, "m=many")


def test_a_bad_option_given_to_fit_says_what_is_wrong_before_the_fit():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 2)), rng.normal(size=30)
    with pytest.raises(ValueError, match="start must be 'snelson' or 'given'"):
        gpscale.fit(X, y, method="spgp", kernel="rbf", start="data")
    with pytest.raises(ValueError, match="tracker must be"):
        gpscale.fit(X, y, method="scgd", kernel="rbf", tracker="other")


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_estimator_reads_the_same_options():
    from gpscale.sklearn import GPRegressor

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 2)), rng.normal(size=30)
    with pytest.raises(ValueError, match="init must be one of"):
        GPRegressor(method="spgp", kernel="rbf", options={"init": "grid"}).fit(X, y)
    fitted = GPRegressor(method="spgp", kernel="rbf", max_iter=3,
                         options={"m": 4, "start": "given"}).fit(X, y)
    assert fitted.predictor_.model.Z.shape[0] == 4


def test_every_option_has_a_default_and_the_cluster_is_none():
    for method in METHODS.values():
        cls = options_class(method)
        if cls is not None:
            assert "client" not in option_defaults(method)
            assert all(f.default is not dataclasses.MISSING or f.name == "client"
                       for f in dataclasses.fields(cls))


# GPCV-ADMM: the fit's options, the trainer's, then every ADMMOptions setting

ADMM_OWN = {"admm-hocv": (("val_fraction", "0.5"), ("validation", "None")),
            "admm-kfold": (("k", "2"), ("workers", "1")),
            "admm-consensus": (("k", "2"), ("workers", "1"), ("tau", "None"),
                               ("local_iters", "1"))}


@pytest.mark.parametrize("name", sorted(ADMM_OWN))
def test_the_admm_options_are_the_fits_the_trainers_and_the_settings_of_before(name):
    from gpscale.methods.admm import SETTINGS
    from gpscale.train.admm import DEFAULT_PRESET, PRESETS, ADMMOptions

    method = METHODS[name]
    head = (("noise", "0.1"), ("seed", "0"), ("max_iter", "100"), ("progress", "False"),
            ("device", "None"))
    tail = (("preset", "'lbfgs-cg'"), ("on_divergence", "'warn'"), ("scale", "'ml'"))
    runs = PRESETS[DEFAULT_PRESET]  # a setting shows what a fit given none runs
    settings = tuple((f.name, repr(runs.get(f.name, f.default)))
                     for f in dataclasses.fields(ADMMOptions) if f.name != "max_iter")
    listed = list(head + ADMM_OWN[name] + tail + settings)
    assert [k for k, _ in settings] == list(SETTINGS)
    assert [(k, repr(v)) for k, v in method_options(method).items()] == listed
    assert [(k, repr(v)) for k, v in option_defaults(method).items()] == listed
    assert set(method.options) == {k for k, _ in listed}
    params = list(inspect.signature(method.fit_fn).parameters.values())[3:]
    assert [(p.name, repr(p.default)) for p in params] == listed + [("client", "None")]


@pytest.mark.parametrize("name", sorted(ADMM_OWN))
def test_the_admm_defaults_are_the_trainers(name):
    from gpscale.train.admm import fit_admm_consensus, fit_admm_hocv, fit_admm_kfold

    trainer = {"admm-hocv": fit_admm_hocv, "admm-kfold": fit_admm_kfold,
               "admm-consensus": fit_admm_consensus}[name]
    cls, params = options_class(METHODS[name]), inspect.signature(trainer).parameters
    given = cls().trainer_options([])
    assert given.pop("options") == cls().settings([])
    assert given.pop("preset") is None
    assert {k: params[k].default for k in given} == given


def test_only_the_admm_settings_given_override_the_preset():
    from gpscale.methods.admm import HoldoutOptions
    from gpscale.train.admm import PRESETS, make_options

    assert HoldoutOptions().settings([]) == make_options(preset="lbfgs-cg", max_iter=100)
    assert PRESETS["lbfgs-cg"]["direction"] == "lbfgs"
    given = HoldoutOptions(direction="coordinate", max_iter=7)
    assert given.settings([]).direction == "lbfgs"  # as left: the preset's
    assert given.settings(["direction"]).direction == "coordinate"
    assert given.settings([]).max_iter == 7
    paper = HoldoutOptions(preset="paper")
    assert paper.settings([]) == make_options(preset="paper", max_iter=100)
    # a setting valid only with the preset's direction is checked with it
    assert HoldoutOptions(coupling="tangent").settings(["coupling"]).direction == "lbfgs"
    with pytest.raises(ValueError, match="coupling='tangent' takes direction"):
        HoldoutOptions(coupling="tangent", preset="paper").settings(["coupling"])


@pytest.mark.parametrize("name,options,says", [
    ("admm-hocv", {"preset": "fast"}, "preset must be one of"),
    ("admm-hocv", {"scale": "none"}, "scale must be 'ml'"),
    ("admm-hocv", {"on_divergence": "ignore"}, "on_divergence must be"),
    ("admm-hocv", {"val_fraction": 1.5}, "val_fraction must lie in"),
    ("admm-hocv", {"val_fraction": "half"}, "val_fraction must lie in"),
    ("admm-hocv", {"noise": -1.0}, "noise must be a positive"),
    ("admm-hocv", {"max_iter": 0}, "max_iter must be an integer >= 1"),
    ("admm-kfold", {"k": 1}, "k must be an integer >= 2"),
    ("admm-kfold", {"workers": 0}, "workers must be an integer >= 1"),
    ("admm-consensus", {"local_iters": 0}, "local_iters must be an integer >= 1"),
    ("admm-consensus", {"tau": -2.0}, "tau must be a positive"),
])
def test_each_admm_options_class_says_what_is_wrong(name, options, says):
    with pytest.raises(ValueError, match=says):
        options_class(METHODS[name])(**options)


def test_a_bad_admm_setting_given_to_fit_says_what_is_wrong_before_the_fit():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 2)), rng.normal(size=30)
    with pytest.raises(ValueError, match="rho must be a positive"):
        gpscale.fit(X, y, method="admm-hocv", kernel="rbf", rho=-1.0)
    with pytest.raises(ValueError, match="does not take option"):
        gpscale.fit(X, y, method="admm-kfold", kernel="rbf", rhoo=5.0)


def test_admm_option_text_is_parsed_by_the_settings_type():
    hocv = METHODS["admm-hocv"]
    assert parse_option(hocv, "rho=2") == ("rho", 2.0)
    assert parse_option(hocv, "cg_max_iter=None") == ("cg_max_iter", None)
    assert parse_option(hocv, "cg_max_iter=50") == ("cg_max_iter", 50)
    assert parse_option(hocv, "adaptive_rho=yes") == ("adaptive_rho", True)
    assert parse_option(hocv, "direction=gd") == ("direction", "gd")
    assert parse_option(METHODS["admm-consensus"], "tau=None") == ("tau", None)
    with pytest.raises(ValueError, match="must be of type int"):
        parse_option(METHODS["admm-kfold"], "k=2.5")


@pytest.mark.parametrize("name,options", [
    ("admm-hocv", {"max_iter": 3, "val_fraction": 0.4, "direction": "coordinate"}),
    ("admm-kfold", {"max_iter": 2, "k": 3, "preset": "paper", "eps": 1e-3}),
    ("admm-consensus", {"max_iter": 2, "tau": 5.0, "local_iters": 2, "seed": 2}),
])
def test_the_admm_method_fits_as_its_trainer_given_the_same_keywords(name, options):
    from gpscale.kernels import RBF
    from gpscale.models import ExactGP
    from gpscale.train.admm import fit_admm_consensus, fit_admm_hocv, fit_admm_kfold

    trainer = {"admm-hocv": fit_admm_hocv, "admm-kfold": fit_admm_kfold,
               "admm-consensus": fit_admm_consensus}[name]
    g = torch.Generator().manual_seed(1)
    X = torch.rand(40, 2, generator=g, dtype=torch.float64)
    y = torch.sin(3 * X[:, 0]) + 0.1 * torch.randn(40, generator=g, dtype=torch.float64)
    model, result = METHODS[name].fit_fn(X, y, RBF(), **options)
    direct = ExactGP(RBF(), X, y, noise=0.1)
    kw = {k: v for k, v in options.items() if k != "seed"}
    expected = trainer(direct, seed=options.get("seed", 0), **kw)
    assert result.objective == expected.objective
    for (k, a), (_, b) in zip(model.state_dict().items(), direct.state_dict().items()):
        assert torch.equal(a, b), k
