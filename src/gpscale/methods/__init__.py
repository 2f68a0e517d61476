"""Training methods, one module per family; importing this package registers them all.

==================  ============================================================
``exact``           exact GP, ML-II by L-BFGS                       (exact.py)
``rff``             FeatureGP on orthogonal random Fourier features (rff.py)
``grief-ii``        GP-GRIEF-II: grid eigenfunctions, ML-II         (grief.py)
``grief-i``         GP-GRIEF-I: re-weighted eigenfunctions, MALA    (grief.py)
``admm-hocv``       exact GP, hold-out CV by GPCV-ADMM              (admm.py)
``admm-kfold``      exact GP, K-fold CV, per-fold ADMM              (admm.py)
``admm-consensus``  exact GP, K-fold CV by consensus ADMM           (admm.py)
``cholqr-vfe``      SparseGP on m training points, CholQR (VFE)     (cholqr.py)
``cholqr-dtc``      SparseGP on m training points, CholQR (DTC)     (cholqr.py)
``minimax``         FeatureGP, unbiased minibatch ML-II, MINIMAX    (stochastic.py)
``scgd``            FeatureGP, unbiased minibatch ML-II, SCGD       (stochastic.py)
``bsgd``            FeatureGP, biased minibatch ML-II               (stochastic.py)
``svgp``            SVGP, minibatch ELBO                            (svgp.py)
``sgpr``            SGPR, m free inducing inputs, VFE by L-BFGS     (sgpr.py)
``spgp``            FITC, m free pseudo-inputs, NLML by L-BFGS      (spgp.py)
==================  ============================================================

Adding a method is adding a module here that calls :func:`register` (and importing it
below).
"""

from . import admm, cholqr, exact, grief, rff, sgpr, spgp, stochastic, svgp  # noqa: F401  (registers)
from .registry import METHODS, Method, get_method, register, register_method

__all__ = ["METHODS", "Method", "get_method", "register", "register_method"]
