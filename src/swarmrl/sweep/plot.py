"""`sweep.png`: the grid's summary as a picture (what the study asks of each cell at a glance).

Top: validation accuracy per group (mean over seeds): a bar for the final value with its
standard error, a dot for the peak and a tick for the start (the base model under that
workflow, before RL); controls first. Bottom: `amp_ratio` (the multiplied role's grad norm over
the single roles' median) with its standard error, beside 1 (no amplification) and the
multiplicity 3 that identical agents would give.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure


SHARING_COLORS = {"shared": "C0", "isolated": "C1", "isolated_full": "C2"}
HATCHES = ("", "//", "xx", "..", "\\\\")  # one per variant, in first-seen order


def group_label(row: dict) -> str:
    """`voting SP`, `voting IP mntrue`, `single-agent RL`, `base`: one bar's name."""
    if row["control"] == "base":
        return "base"
    if row["control"] == "single":
        return "single-agent RL"
    sharing = {"shared": "SP", "isolated": "IP", "isolated_full": "IP-full"}.get(row["sharing"], row["sharing"])
    return " ".join(x for x in (row["workflow"], sharing, row["variant"]) if x)


def _values(rows: list[dict], key: str) -> tuple[np.ndarray, np.ndarray]:
    """(means, standard errors) with NaN where a group has none (matplotlib leaves a gap)."""
    mean = np.array([np.nan if r.get(key) is None else r[key] for r in rows], dtype=float)
    se = np.array([np.nan if r.get(f"{key}_se") is None else r[f"{key}_se"] for r in rows], dtype=float)
    return mean, np.nan_to_num(se)


def plot_summary(summary: list[dict], path: Path) -> Path | None:
    """Draw the summary rows (sweep.table.summarize) into path; None when there are none."""
    if not summary:
        return None
    rows = [r for r in summary if r["control"]] + [r for r in summary if not r["control"]]
    x = np.arange(len(rows))
    fig = Figure(figsize=(max(8.0, 0.55 * len(rows) + 2), 7.5))
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    final, final_se = _values(rows, "final_val_acc")
    colors = ["0.6" if r["control"] else SHARING_COLORS.get(r["sharing"], "C4") for r in rows]
    variants = list(dict.fromkeys(r["variant"] for r in rows if not r["control"]))
    hatches = [HATCHES[variants.index(r["variant"]) % len(HATCHES)] if not r["control"] else "" for r in rows]
    top.bar(x, final, yerr=final_se, color=colors, hatch=hatches, capsize=3, label="final (± s.e.)")
    top.plot(x, _values(rows, "peak_val_acc")[0], "o", color="k", ms=4, label="peak")
    top.plot(x, _values(rows, "start_val_acc")[0], "_", color="C3", ms=14, mew=2, label="start (before RL)")
    top.set_ylabel("validation accuracy")
    top.set_title(f"workflow grid: mean over seeds (n = {max(r['seeds'] for r in rows)})")
    top.legend(fontsize=8, loc="upper right")
    top.grid(axis="y", alpha=0.3)
    amp, amp_se = _values(rows, "amp_ratio")
    bottom.bar(x, amp, yerr=amp_se, color=colors, hatch=hatches, capsize=3)
    bottom.axhline(1.0, color="k", lw=0.8, ls="--", label="1: no amplification")
    bottom.axhline(3.0, color="C3", lw=0.8, ls=":", label="3: the multiplicity")
    bottom.set_ylabel("amp_ratio")
    bottom.set_ylim(bottom=0)
    bottom.legend(fontsize=8, loc="upper right")
    bottom.grid(axis="y", alpha=0.3)
    bottom.set_xticks(x, [group_label(r) for r in rows], rotation=45, ha="right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return Path(path)
