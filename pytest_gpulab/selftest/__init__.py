"""``gpulab selftest LAB``: a lab proven from its own folder. ``variants`` reads its ``variants.toml``,
``prove`` grades the rows on fresh lab clusters, ``state`` reads around each grading and ``judge``
decides each row and prints the matrix."""
