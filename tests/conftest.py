import os
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("GPSCALE_DATA", ROOT.parent / "shared" / "data"))

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(params=DEVICES)
def device(request):
    """Dense-reference tests run on every available device."""
    return torch.device(request.param)


@pytest.fixture
def data_dir():
    if not DATA.exists():
        pytest.skip(f"shared data not found at {DATA} (set GPSCALE_DATA)")
    return DATA


#: cheap options per registered method, so tests can run the whole registry in seconds
CHEAP_OPTIONS = {
    "exact": {"max_iter": 5}, "rff": {"max_iter": 5, "num_features": 16},
    "grief-ii": {"max_iter": 3, "num_features": 20},
    "grief-i": {"num_features": 10, "n_iter": 40, "burn": 10, "thin": 10},
    "admm-hocv": {"max_iter": 3}, "admm-kfold": {"max_iter": 3},
    "admm-consensus": {"max_iter": 3},
    "cholqr-vfe": {"m": 6, "max_epochs": 1}, "cholqr-dtc": {"m": 6, "max_epochs": 1},
    "minimax": {"epochs": 1, "num_features": 16}, "scgd": {"epochs": 1, "num_features": 16},
    "bsgd": {"epochs": 1, "num_features": 16}, "svgp": {"epochs": 1, "num_inducing": 5},
    "sgpr": {"m": 6, "max_iter": 5}, "spgp": {"m": 6, "max_iter": 5},
}


@pytest.fixture
def cheap_options():
    """Cheap options per registered method (a copy)."""
    return {k: dict(v) for k, v in CHEAP_OPTIONS.items()}


def pytest_configure(config):
    """Under pytest-xdist each worker takes its share of the cores (unless the caller set
    OMP_NUM_THREADS), so that two workers on two cores do not run two BLAS threads each."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers and "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // int(workers)))
