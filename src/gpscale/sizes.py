"""Memory budgets shared by every pass over rows (one place, so that reading a source,
computing feature statistics and forming kernel blocks agree on what a chunk is)."""

#: bytes of one chunk of rows (or of Φ and its temporaries) held at a time by a pass
CHUNK_BYTES = 64 << 20
