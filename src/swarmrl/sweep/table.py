"""Sweep grids and the results table (the paper's SP vs IP x workflow comparison).

A grid file names a base config, the axes to vary and fixed overrides:

    base: configs/rlcr_arith.yaml
    axes:
      workflow.name: [voting, eval_opt]
      policy.sharing: [shared, isolated]
      model.hidden_size: [64, 128]
      seed: [0, 1]
    overrides: {rl.steps: 6}

`expand_grid` turns it into cells (the cartesian product, last axis varying fastest, in the
file's axis order) with readable names such as `voting-shared-h64-s0`; `write_table`
writes one row per run as CSV and Markdown, with the controls Zeng et al. (2026) compare
against — `base` (the warm start, no RL) and `single` (single-agent RL on the same task and
scale) — and a summary over seeds. The peak-vs-final gap is the paper's "final-accuracy
cliff", so it is a column of its own.
"""

from __future__ import annotations

import csv
import itertools
import math
import re
from collections import Counter
from pathlib import Path

GRID_KEYS = ("base", "axes", "overrides")
CONTROLS = ("base", "single")
"""Control rows: `base` = the warm start evaluated without RL, `single` = single-agent RL."""
COLUMNS = ("cell", "control", "workflow", "sharing", "model", "seed", "peak_val_acc", "final_val_acc", "cliff",
           "alerts")
SUMMARY_COLUMNS = ("control", "workflow", "sharing", "model", "seeds", "peak_val_acc", "final_val_acc", "cliff",
                   "alerts")
_ABBREV = {"hidden_size": "h", "seed": "s"}  # the axes every sweep has get the shortest names


def _axis_prefix(axis: str) -> str:
    """`model.hidden_size` -> `h`, `seed` -> `s`, `rl.lr` -> `lr`, `model.num_layers` -> `nl`."""
    last = axis.split(".")[-1]
    if last in _ABBREV:
        return _ABBREV[last]
    words = [w for w in last.split("_") if w]
    return last if len(words) <= 1 else "".join(w[0] for w in words)


def _name_part(axis: str, value) -> str:
    """Strings stand for themselves (`voting`); numbers and booleans carry the axis prefix (`h64`)."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, bool):
        text = f"{_axis_prefix(axis)}{str(value).lower()}"
    elif isinstance(value, float):
        text = f"{_axis_prefix(axis)}{value:g}"
    else:
        text = f"{_axis_prefix(axis)}{value}"
    return re.sub(r"[^A-Za-z0-9_.+]", "_", text)  # "-" separates parts, so 3e-05 -> 3e_05


def expand_grid(grid: dict) -> list[tuple[str, dict]]:
    """Cells of a sweep grid: [(cell_name, {dotted.key: value, ...})].

    Each cell's dict holds the grid's `overrides` and the cell's axis values, ready to be
    applied as `key=value` overrides to the config at `grid["base"]` (which the caller reads).
    """
    if not isinstance(grid, dict):
        raise ValueError(f"a sweep grid must be a mapping with keys {list(GRID_KEYS)}; got {type(grid).__name__}")
    unknown = sorted(set(grid) - set(GRID_KEYS))
    if unknown:
        raise ValueError(f"unknown sweep grid keys {unknown}; valid: {list(GRID_KEYS)}")
    axes = grid.get("axes")
    if not isinstance(axes, dict) or not axes:
        raise ValueError("a sweep grid needs a non-empty mapping 'axes' of key -> list of values")
    overrides = grid.get("overrides") or {}
    if not isinstance(overrides, dict):
        raise ValueError(f"sweep 'overrides' must be a mapping; got {type(overrides).__name__}")
    both = sorted(set(axes) & set(overrides))
    if both:
        raise ValueError(f"keys {both} are both an axis and a fixed override")
    for axis, values in axes.items():
        if not isinstance(values, list):
            raise ValueError(f"axis '{axis}' must be a list of values; got {type(values).__name__} {values!r}")
        if not values:
            raise ValueError(f"axis '{axis}' is empty: a sweep over no values has no cells")
        for v in values:
            if not isinstance(v, (str, int, float, bool)):
                raise ValueError(f"axis '{axis}' has a non-scalar value {v!r}")
        names = [_name_part(axis, v) for v in values]
        if len(set(names)) != len(names):
            raise ValueError(f"axis '{axis}' has values that give the same cell name: {values}")

    keys = list(axes)
    cells = []
    for combo in itertools.product(*(axes[k] for k in keys)):
        name = "-".join(_name_part(k, v) for k, v in zip(keys, combo))
        cells.append((name, {**overrides, **dict(zip(keys, combo))}))
    seen = Counter(name for name, _ in cells)
    clashes = sorted(n for n, c in seen.items() if c > 1)
    if clashes:  # e.g. two string axes whose values read alike
        raise ValueError(f"cell names are not unique: {clashes}")
    return cells


# --- results table --------------------------------------------------------------------------------

def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _alert_labels(alerts) -> list[str]:
    """Alerts as `name/role` (dicts or Alert-like objects) or given names (strings)."""
    out = []
    for a in alerts or []:
        if isinstance(a, str):
            out.append(a)
        else:
            name, role = (a.get("name"), a.get("role")) if isinstance(a, dict) else (a.name, a.role)
            out.append(f"{name}/{role}" if role else str(name))
    return out


def _alerts_text(labels: list[str]) -> str:
    if not labels:
        return "0"
    counts = Counter(labels)
    return f"{len(labels)}: " + ", ".join(f"{k} x{n}" if n > 1 else k for k, n in sorted(counts.items()))


def _table_row(row: dict) -> dict:
    if "cell" not in row:
        raise ValueError(f"a sweep row needs a 'cell'; got keys {sorted(row)}")
    control = row.get("control") or ""
    if control and control not in CONTROLS:
        raise ValueError(f"row '{row['cell']}': control must be one of {list(CONTROLS)}; got {control!r}")
    peak, final = _num(row.get("peak_val_acc")), _num(row.get("final_val_acc"))
    labels = _alert_labels(row.get("alerts"))
    return {"cell": str(row["cell"]), "control": control, "workflow": row.get("workflow", ""),
            "sharing": row.get("sharing", ""), "model": row.get("model", ""), "seed": row.get("seed", ""),
            "peak_val_acc": peak, "final_val_acc": final,
            "cliff": peak - final if peak is not None and final is not None else None,
            "alerts": _alerts_text(labels), "_n_alerts": len(labels)}


def _mean(values: list) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def summarize(rows: list[dict]) -> list[dict]:
    """Mean over seeds of every (control, workflow, sharing, model), in first-seen order."""
    groups: dict[tuple, list[dict]] = {}
    for r in map(_table_row, rows):
        groups.setdefault((r["control"], r["workflow"], r["sharing"], r["model"]), []).append(r)
    out = []
    for (control, workflow, sharing, model), rs in groups.items():
        out.append({"control": control, "workflow": workflow, "sharing": sharing, "model": model, "seeds": len(rs),
                    "peak_val_acc": _mean([r["peak_val_acc"] for r in rs]),
                    "final_val_acc": _mean([r["final_val_acc"] for r in rs]),
                    "cliff": _mean([r["cliff"] for r in rs]),
                    "alerts": sum(r["_n_alerts"] for r in rs)})
    return out


def _md_cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v).replace("|", "\\|")


def _md_table(columns: tuple[str, ...], rows: list[dict]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_md_cell(r[c]) for c in columns) + " |" for r in rows]
    return lines


def write_table(rows: list[dict], out_dir: Path) -> tuple[Path, Path]:
    """Write `sweep.csv` and `sweep.md` under out_dir; return their paths.

    A row: cell, workflow, sharing, model, seed, peak_val_acc, final_val_acc, alerts (a list
    of alert names, or dicts/Alerts with name and role), and `control` ("base" | "single")
    for the control runs. cliff = peak - final is computed here. Controls come first.
    """
    table = [_table_row(r) for r in rows]
    table = [r for r in table if r["control"]] + [r for r in table if not r["control"]]  # stable
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out_dir / "sweep.csv", out_dir / "sweep.md"
    with csv_path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(COLUMNS), extrasaction="ignore")
        w.writeheader()
        for r in table:
            w.writerow({c: "" if r[c] is None else r[c] for c in COLUMNS})
    shown = [{**r, "cell": f"{r['cell']} (control)" if r["control"] else r["cell"]} for r in table]
    lines = ["# Sweep results", "",
             "cliff = peak_val_acc - final_val_acc (the final-accuracy cliff of Zeng et al. 2026); "
             "controls: `base` = warm start without RL, `single` = single-agent RL.", ""]
    lines += _md_table(COLUMNS, shown)
    lines += ["", "## Summary (mean over seeds)", ""]
    lines += _md_table(SUMMARY_COLUMNS, summarize(rows))
    md_path.write_text("\n".join(lines) + "\n")
    return csv_path, md_path
