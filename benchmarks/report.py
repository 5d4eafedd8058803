"""Rows of results: the printed table, ``latest.json`` and the chart.

A row holds its figures (median, min, max of the runs), the headline value
compared with the target, the target in words and whether it holds
(``None``: not measured in this run, with the reason in ``note``).
"""

from __future__ import annotations

import json
import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .common import Figure


@dataclass
class Row:
    """One line of the table."""

    number: str
    title: str
    measured: str
    target: str
    holds: bool | None
    figures: dict[str, Figure] = field(default_factory=dict)
    value: float | None = None
    note: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "title": self.title,
            "measured": self.measured,
            "target": self.target,
            "holds": self.holds,
            "value": _finite(self.value),
            "note": self.note,
            "figures": {name: figure.as_dict() for name, figure in self.figures.items()},
            "details": self.details,
        }


def skipped(number: str, title: str, target: str, reason: str) -> Row:
    """A row that could not be measured in this run, and why."""
    return Row(number, title, "not measured", target, None, note=reason)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def verdict(holds: bool | None) -> str:
    return {True: "yes", False: "NO", None: "n/a"}[holds]


def table(rows: list[Row]) -> str:
    """The rows as a fixed-width text table."""
    header = ("#", "benchmark", "measured", "target", "holds")
    lines = [header] + [(r.number, r.title, r.measured, r.target, verdict(r.holds)) for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for index, line in enumerate(lines):
        out.append("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)))
        if index == 0:
            out.append("  ".join("-" * width for width in widths))
    notes = [f"  {r.number}: {r.note}" for r in rows if r.note]
    if notes:
        out += ["", "notes:", *notes]
    return "\n".join(out)


def write_json(
    path: Path, *, machine: dict[str, Any], rows: list[Row], meta: dict[str, Any]
) -> None:
    """Writes the run to ``path`` (via a temporary file, so a crash leaves
    the previous results)."""
    data = {"machine": machine, "run": meta, "rows": [row.as_dict() for row in rows]}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    tmp.replace(path)


def write_chart(path: Path, rows: list[Row], *, title: str) -> bool:
    """A PNG with one panel per row that has figures: each variant's median
    as a bar, its min-max as a whisker. ``False`` without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    panels = [row for row in rows if row.figures]
    if not panels:
        return False
    columns = 3
    lines = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(lines, columns, figsize=(15, 4.2 * lines), squeeze=False)
    for ax in axes.flat[len(panels) :]:
        ax.axis("off")
    for ax, row in zip(axes.flat, panels, strict=False):
        names = list(row.figures)
        medians = [row.figures[n].median for n in names]
        low = [m - row.figures[n].min for n, m in zip(names, medians, strict=True)]
        high = [row.figures[n].max - m for n, m in zip(names, medians, strict=True)]
        colours = ["#2b7bba" if _is_ours(n) else "#9a9a9a" for n in names]
        ax.barh(range(len(names)), medians, xerr=[low, high], color=colours, capsize=3)
        ax.set_yticks(
            range(len(names)),
            [textwrap.fill(n, 18, break_long_words=False) for n in names],
            fontsize=7,
        )
        ax.invert_yaxis()
        units = {row.figures[n].unit for n in names}
        ax.set_xlabel(" / ".join(sorted(units)), fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        mark = {True: "holds", False: "MISSED", None: "n/a"}[row.holds]
        heading = f"{row.number}. {row.title}: {row.measured} (target {row.target}: {mark})"
        ax.set_title(
            textwrap.fill(heading, 62),
            fontsize=8,
            color={True: "#1a7f37", False: "#c0392b", None: "#555555"}[row.holds],
        )
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    tmp = path.with_suffix(".png.tmp")
    fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    tmp.replace(path)
    return True


def _is_ours(name: str) -> bool:
    return name.startswith(
        ("astral", "ours", "claim_task", "claim_tasks", "enqueue_claimed", "consume_claimed")
    )
