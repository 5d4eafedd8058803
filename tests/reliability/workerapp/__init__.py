"""The app the reliability tests' worker processes load: one claimed task
that records its runs in a table (see :mod:`.tasks`)."""
