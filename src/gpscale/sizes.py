"""Memory budgets shared by every pass over rows (one place, so that reading a source,
computing feature statistics and forming kernel blocks agree on what a chunk is), and
the memory a new allocation may take."""

import os

#: bytes of one chunk of rows (or of Φ and its temporaries) held at a time by a pass
CHUNK_BYTES = 64 << 20


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (MemAvailable on Linux)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
