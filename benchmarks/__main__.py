"""``python -m benchmarks NAME ...``: the same as ``gpscale bench NAME ...``."""

import sys

from . import main

sys.exit(main())
