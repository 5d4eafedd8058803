"""The benchmarks' Django app: the no-op tasks every system runs."""
