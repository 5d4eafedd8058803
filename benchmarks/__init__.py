"""``make bench``: astral-taskclaim measured against PostgreSQL's own floor and
against the task queues users would pick instead.

``python -m benchmarks`` starts (or joins) a PostgreSQL server, migrates a
fresh database per system, runs every row with fixed seeds and prints a table
of ratios, each with its target. Results go to ``benchmarks/results/``
(``latest.json`` and the chart ``latest.png``). See ``docs/benchmarks.md``.

Each row lives in its own module, exposing ``run(ctx, ...) -> list[Row]``
with sizes as keyword arguments, so the smoke test can run it tiny.
"""
