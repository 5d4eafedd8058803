"""The claimed task the end-to-end tests' worker subprocesses run."""
