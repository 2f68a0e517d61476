"""Data: the real sets of ../shared/data (downloaded with a checksum when absent), the
weekly CO₂ record shipped by statsmodels, and the GPCV-ADMM synthetic generators."""

from .featurize import kmer_counts, morgan_counts, reaction_counts, sequence_codes
from .loaders import (
    DISCRETE_COLUMNS,
    DISCRETE_NAMES,
    UCI_ALIASES,
    UCI_LARGE_NAMES,
    UCI_NAMES,
    UCISplit,
    co2_monthly_from_raw,
    co2_weekly,
    dataset_arrays,
    decimal_year,
    kin40k_from_raw,
    load_co2_monthly,
    load_discrete,
    load_kin40k_10k30k,
    load_snelson,
    load_uci,
    snelson_from_raw,
    uci_from_raw,
)
from .sources import SOURCES, DataUnavailableError, cache_dir, data_dir
from .synthetic import PAPER_THETA, SyntheticSet, gp_draw, paper_kernel, synthetic_admm

__all__ = [
    "data_dir", "cache_dir", "SOURCES", "DataUnavailableError",
    "UCI_NAMES", "UCI_LARGE_NAMES", "UCI_ALIASES", "UCISplit", "load_uci",
    "load_snelson", "load_kin40k_10k30k", "load_co2_monthly", "co2_weekly",
    "DISCRETE_NAMES", "DISCRETE_COLUMNS", "load_discrete",
    "uci_from_raw", "snelson_from_raw", "kin40k_from_raw", "co2_monthly_from_raw",
    "decimal_year", "dataset_arrays",
    "PAPER_THETA", "SyntheticSet", "synthetic_admm", "gp_draw", "paper_kernel",
    "morgan_counts", "reaction_counts", "sequence_codes", "kmer_counts",
]
