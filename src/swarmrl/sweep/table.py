"""Sweep grids and the results table (the paper's SP vs IP x workflow comparison).

A grid file names a base config, the axes to vary and fixed overrides:

    base: configs/rlcr_arith.yaml
    axes:
      workflow.name: [voting, eval_opt]
      policy.sharing: [shared, isolated]
      model.hidden_size: [64, 128]
      seed: [0, 1]
    overrides: {rl.steps: 6}
    controls: [base, single]   # the default; [base] when single-agent RL is a cell of its own
    exclude:                   # cells to skip: every key of an entry matches (e.g. a no-op variant)
      - {workflow.name: eval_opt, seed: 1}

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
import statistics
from collections import Counter
from pathlib import Path

from swarmrl.sweep.plot import plot_summary

GRID_KEYS = ("base", "axes", "overrides", "controls", "exclude")
CONTROLS = ("base", "single")
"""Control rows: `base` = the warm start evaluated without RL, `single` = single-agent RL."""
COLUMNS = ("cell", "control", "workflow", "sharing", "variant", "model", "seed", "start_val_acc", "peak_val_acc",
           "final_val_acc", "cliff", "amp_ratio", "alerts")
SUMMARY_COLUMNS = ("control", "workflow", "sharing", "variant", "model", "seeds", "start_val_acc", "peak_val_acc",
                   "final_val_acc", "cliff", "amp_ratio", "amplification", "capture", "cliff_alerts", "alerts")
ALERT_KINDS = {"amplification": "gradient_amplification", "capture": "role_capture", "cliff_alerts": "accuracy_cliff"}
"""Summary columns counting one detector's alerts (over every seed of a group)."""
SPREAD = ("peak_val_acc", "final_val_acc", "cliff", "amp_ratio")
"""Summary columns shown as mean ± standard error over seeds (sample std / sqrt(n); 0 for one seed)."""
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
    controls = grid.get("controls", list(CONTROLS))
    if not isinstance(controls, list) or not set(controls) <= set(CONTROLS):
        raise ValueError(f"sweep 'controls' must be a list drawn from {list(CONTROLS)}; got {controls!r}")
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

    exclude = _exclusions(grid.get("exclude") or [], axes)
    keys = list(axes)
    cells = []
    for combo in itertools.product(*(axes[k] for k in keys)):
        cell = dict(zip(keys, combo))
        if any(all(cell[k] == v for k, v in ex.items()) for ex in exclude):
            continue
        name = "-".join(_name_part(k, v) for k, v in zip(keys, combo))
        cells.append((name, {**overrides, **dict(zip(keys, combo))}))
    seen = Counter(name for name, _ in cells)
    clashes = sorted(n for n, c in seen.items() if c > 1)
    if clashes:  # e.g. two string axes whose values read alike
        raise ValueError(f"cell names are not unique: {clashes}")
    return cells


def _exclusions(exclude, axes: dict) -> list[dict]:
    """The grid's `exclude` entries, checked: each a mapping from axes to values they take."""
    if not isinstance(exclude, list) or not all(isinstance(e, dict) and e for e in exclude):
        raise ValueError(f"sweep 'exclude' must be a list of non-empty mappings axis -> value; got {exclude!r}")
    for e in exclude:
        for k, v in e.items():
            if k not in axes or v not in axes[k]:
                raise ValueError(f"sweep 'exclude' entry {e}: {k}={v!r} is not a value of an axis")
    return exclude


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
            "sharing": row.get("sharing", ""), "variant": row.get("variant", ""), "model": row.get("model", ""),
            "seed": row.get("seed", ""), "start_val_acc": _num(row.get("start_val_acc")),
            "peak_val_acc": peak, "final_val_acc": final,
            "cliff": peak - final if peak is not None and final is not None else None,
            "amp_ratio": _num(row.get("amp_ratio")), "alerts": _alerts_text(labels), "_labels": labels}


def _mean(values: list) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _stderr(values: list) -> float | None:
    """Standard error of the mean: sample standard deviation / sqrt(n); 0 for a single value."""
    vals = [v for v in values if v is not None]
    if len(vals) < 2:
        return 0.0 if vals else None
    return statistics.stdev(vals) / math.sqrt(len(vals))


GROUP_KEYS = ("control", "workflow", "sharing", "variant", "model")


def summarize(rows: list[dict]) -> list[dict]:
    """Mean (and `<col>_se`, standard error) over seeds of every group, in first-seen order;
    alerts counted in total and per detector (ALERT_KINDS)."""
    groups: dict[tuple, list[dict]] = {}
    for r in map(_table_row, rows):
        groups.setdefault(tuple(r[k] for k in GROUP_KEYS), []).append(r)
    out = []
    for key, rs in groups.items():
        labels = [lab for r in rs for lab in r["_labels"]]
        row = {**dict(zip(GROUP_KEYS, key)), "seeds": len(rs),
               "start_val_acc": _mean([r["start_val_acc"] for r in rs]), "alerts": len(labels)}
        for col in SPREAD:
            row[col], row[f"{col}_se"] = _mean([r[col] for r in rs]), _stderr([r[col] for r in rs])
        for col, name in ALERT_KINDS.items():
            row[col] = sum(lab.split("/")[0].split(":")[0] == name for lab in labels)
        out.append(row)
    return out


def variance_explained(rows: list[dict], key: str = "final_val_acc",
                       factors: tuple[str, ...] = ("workflow", "sharing", "variant", "seed")) -> dict[str, float]:
    """Share of the cells' variance in `key` that each factor's group means explain alone
    (between-group sum of squares / total sum of squares, eta squared); controls left out.
    The paper's claim "workflow choice explains more of the variance than SP vs IP" is
    `workflow` > `sharing` here. Factors with one level, or no variance at all, are omitted."""
    cells = [r for r in map(_table_row, rows) if not r["control"] and r[key] is not None]
    if len(cells) < 2:
        return {}
    mean = sum(r[key] for r in cells) / len(cells)
    total = sum((r[key] - mean) ** 2 for r in cells)
    out = {}
    for f in factors:
        groups: dict = {}
        for r in cells:
            groups.setdefault(r[f], []).append(r[key])
        if len(groups) > 1 and total > 0:
            out[f] = sum(len(g) * (sum(g) / len(g) - mean) ** 2 for g in groups.values()) / total
    return out


def _with_spread(row: dict) -> dict:
    """A summary row for Markdown: `mean ± se` where more than one seed was averaged."""
    shown = dict(row)
    for col in SPREAD:
        if row["seeds"] > 1 and row[col] is not None and row[f"{col}_se"] is not None:
            shown[col] = f"{row[col]:.3f} ± {row[f'{col}_se']:.3f}"
    return shown


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
    """Write `sweep.csv`, `sweep.md` and `sweep.png` (sweep/plot.py) under out_dir; return the
    paths of the first two.

    A row: cell, workflow, sharing, variant (the cell's other axis values), model, seed,
    start_val_acc (before RL), peak_val_acc, final_val_acc, amp_ratio (the run's mean largest
    multiplied-role grad-norm ratio, diagnostics.detectors.mean_amplification), alerts (a list
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
    lines += ["", "## Summary (mean over seeds)", "",
              "mean ± standard error over seeds; start = validation accuracy before RL (the cell's own "
              "workflow); amp_ratio = grad norm of the multiplied role / median of the single roles, mean over "
              "steps; amplification / capture / cliff_alerts count that detector's alerts over all seeds.", ""]
    summary = summarize(rows)
    lines += _md_table(SUMMARY_COLUMNS, [_with_spread(r) for r in summary])
    shares = variance_explained(rows)
    if shares:
        lines += ["", "Share of the cells' variance in final accuracy explained by each factor alone (eta squared): "
                  + ", ".join(f"{f} {v:.2f}" for f, v in shares.items()) + "."]
    if plot_summary(summary, out_dir / "sweep.png"):
        lines += ["", "![the grid: accuracy and amplification per group](sweep.png)"]
    md_path.write_text("\n".join(lines) + "\n")
    return csv_path, md_path
