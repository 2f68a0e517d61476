"""Data sources and writers: rows of (X, y) from CSV / Parquet files, globs and
directories, in-memory arrays and data frames, and dask collections, streamed in
fixed-size chunks; predictions streamed back out to CSV or Parquet.

>>> src = open_source("data/*.parquet", target="y")          # doctest: +SKIP
>>> for X, y in src.chunks(rows=100_000): ...                 # doctest: +SKIP
>>> parts = src.partitions()   # picklable: read each one elsewhere with .chunks(rows)
"""

from .batch import Batch, Columns, Origin, Partition, rechunk
from .csvfile import CsvPartition
from .daskdata import DaskPartition
from .fingerprint import Fingerprint, SourceChangedError
from .given import TrainingData, training_data
from .inputs import StringInputs, open_strings, prediction_source, training_source
from .memory import ArrayPartition, FramePartition
from .parquetfile import ParquetPartition
from .paths import FORMATS, file_format, find_files
from .rows import Rows, TensorPartition, as_rows
from .source import CHUNK_BYTES, Source, open_source
from .write import write_table

__all__ = ["open_source", "Source", "write_table", "Partition", "Batch", "Columns", "Origin",
           "CsvPartition", "ParquetPartition", "ArrayPartition", "FramePartition",
           "DaskPartition", "find_files", "file_format", "rechunk", "CHUNK_BYTES", "FORMATS",
           "StringInputs", "open_strings", "training_source", "prediction_source", "Rows",
           "TensorPartition", "as_rows", "TrainingData", "training_data", "Fingerprint",
           "SourceChangedError"]
