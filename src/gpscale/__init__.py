"""gpscale: Gaussian-process hyperparameter learning at scale.

``gpscale.fit(X, y, method=..., kernel=...)`` trains on raw data and returns a
:class:`Predictor`; the building blocks live in the sub-packages: ``kernels``,
``features``, ``linalg``, ``models``, ``train``, ``methods``, ``io``, ``parallel``,
``data`` and ``metrics``. The benchmarks are not part of the package (``gpscale bench``
runs them from a checkout).
"""

import os as _os
import signal as _signal
import sys as _sys
import threading as _threading
from pathlib import Path as _Path

# a worker process of gpscale's local dask cluster (gpscale.parallel.cluster.
# LOCAL_WORKER_ENV): Ctrl-C reaches the whole process group, and the client closes it
if _os.environ.get("GPSCALE_LOCAL_WORKER") == "1" and \
        _threading.current_thread() is _threading.main_thread():
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)


def _started_as_command() -> bool:
    """Whether this process is the ``gpscale`` command (the console script or ``python -m
    gpscale.cli``), not a Python session that imports gpscale."""
    main = _sys.modules.get("__main__")
    if _Path(getattr(main, "__file__", None) or "").name in ("gpscale", "gpscale.exe"):
        return True
    argv = list(getattr(_sys, "orig_argv", []))  # python -m gpscale.cli ...
    return any(a == "-m" and b == "gpscale.cli" for a, b in zip(argv, argv[1:]))


try:
    from . import api, data, features, kernels, linalg, methods, metrics, models, train
    from .api import METHODS, Choice, Predictor, choose, fit, load, register_method
    from .kernels import make_kernel
    from .models import ExactGP, FeatureGP
    from .train import ConvergenceWarning, FitResult, SizeWarning, fit_lbfgs
except KeyboardInterrupt:  # Ctrl-C while the command is still importing torch & co.
    if not _started_as_command():
        raise
    print("gpscale: interrupted while starting; nothing was done", file=_sys.stderr)
    raise SystemExit(130) from None

__version__ = "0.1.0"

__all__ = ["api", "methods", "data", "features", "kernels", "linalg", "metrics", "models", "train",
           "fit", "load", "choose", "Choice", "Predictor", "register_method", "METHODS",
           "make_kernel", "ExactGP",
           "FeatureGP", "FitResult", "fit_lbfgs", "ConvergenceWarning", "SizeWarning",
           "__version__"]
