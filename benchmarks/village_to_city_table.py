"""One markdown table from `benchmarks/village_to_city.py` results: per file and team cap, the
team hired (the CEO included) and of it the hires experts made, then items solved at each limit.
With `--plot PNG`, also a figure: the team hired and the items solved at `--limit` against the
cap, one line per file.

    python benchmarks/village_to_city_table.py benchmarks/village_to_city_span/*.json [--plot F.png --limit 4.5]
    python benchmarks/village_to_city_table.py benchmarks/village_to_city_items24/rl_*.json --gains 17

`--gains SIZE`: instead, per RL run (`rl_NAME.json`), the items a team of SIZE solves at each
limit against the best team at the training cap (9): the better of that file's team of 9 and, where
`at_cap_NAME.json` stands beside it (the tree the run trained in), that file's team of 9.

Files without `rows` (e.g. a scripted-ceilings JSON beside them) are skipped.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path


def table(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    if "rows" not in data:
        return []
    limits = sorted({r["time_limit_s"] for r in data["rows"]})
    out = [f"**{path.stem}** (`{data['run']}`, overrides {data.get('overrides') or 'none'}; "
           f"{data['problems']} problems of {data['items']} items, wall {data['wall_s']:.0f} s, "
           f"peak RSS {data['peak_rss_mb']:.0f} MB)", "",
           "| team (cap + CEO) | team hired | by experts | " + " | ".join(f"items @ {t:g} s" for t in limits) + " |",
           "|---|---|---|" + "---|" * len(limits)]
    for size in sorted({r["team_size"] for r in data["rows"]}):
        rows = sorted((r for r in data["rows"] if r["team_size"] == size), key=lambda r: r["time_limit_s"])
        last = rows[-1]  # the team as hired by the longest limit
        out.append(f"| {size} | {last['team_size_mean']:.1f} | {last['team_hired_by_experts_per_rollout']:.1f} | "
                   + " | ".join(f"{r['useful_work']:.2f}" for r in rows) + " |")
    return out + [""]


def gains(paths: list[Path], size: int, cap: int = 9) -> list[str]:
    """Per RL run: items solved by a team of `size` at each limit, the best team at `cap` (its own
    file's, or its trained tree's in `at_cap_*`), and the change in percent ('-' where a file has
    no such row)."""
    runs = []
    for path in paths:
        rows = json.loads(path.read_text()).get("rows", [])
        at_cap = path.with_name(path.name.replace("rl_", "at_cap_", 1))
        tree = json.loads(at_cap.read_text()).get("rows", []) if path.name.startswith("rl_") and at_cap.exists() else []
        runs.append((path.stem, rows, tree))
    limits = sorted({r["time_limit_s"] for _, rows, _ in runs for r in rows})
    out = [f"| run | " + " | ".join(f"{size} / best {cap} @ {t:g} s" for t in limits) + " |",
           "|---|" + "---|" * len(limits)]
    for stem, rows, tree in runs:
        cells = []
        for t in limits:
            big = [r["useful_work"] for r in rows if r["team_size"] == size and r["time_limit_s"] == t]
            base = [r["useful_work"] for r in rows + tree if r["team_size"] == cap and r["time_limit_s"] == t]
            best = max(base, default=None)
            cells.append("-" if not big or best is None else
                         f"{big[0]:.1f} / {best:.1f} ({100 * (big[0] / best - 1):+.0f}%)" if best else f"{big[0]:.1f} / 0")
        out.append(f"| {stem} | " + " | ".join(cells) + " |")
    return out


def _ws_tag(stem: str) -> str:
    """The warm-start seed a result file names (`_wsS`, run.sh's WS_SEED), '' for the default one."""
    m = re.search(r"_ws\d+", stem)
    return m.group(0) if m else ""


def _rl_seed(stem: str) -> int | None:
    """The RL seed a result file names (`_sR`, at the end or before another `_` part), or None."""
    m = re.search(r"_s(\d+)(?=_|$)", stem)
    return int(m.group(1)) if m else None


def plot(paths: list[Path], out: Path, limit: float) -> None:
    """Team hired and items solved at `limit` against the team cap, one line per result file."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (hired, solved) = plt.subplots(1, 2, figsize=(13, 4.2))
    colors = plt.get_cmap("tab10").colors + plt.get_cmap("Dark2").colors  # 18 without a repeat
    plotted: set[int] = set()
    tagged = any(_ws_tag(p.stem) for p in paths)
    families = dict.fromkeys(_ws_tag(p.stem) for p in paths)  # in order of first appearance
    items = None  # the first plotted file's problem size: the others must match it
    for i, path in enumerate(paths):
        data = json.loads(path.read_text())
        rows = [r for r in data.get("rows", []) if r["team_size"] > 1]
        if not rows or data["items"] != (items := items or data["items"]):
            continue
        sizes = sorted({r["team_size"] for r in rows})
        longest = max(r["time_limit_s"] for r in rows)
        last = {r["team_size"]: r for r in rows if r["time_limit_s"] == longest}
        at = {r["team_size"]: r for r in rows if r["time_limit_s"] == limit}
        if len(at) < len(sizes):
            continue
        plotted |= set(sizes)
        # warm starts dashed, so a run and the prior it came from read apart; where the files
        # name warm-start seeds (_wsS), one colour per seed and one marker per RL seed
        family = _ws_tag(path.stem) if tagged else path.stem
        color = colors[list(families).index(family) % len(colors)] if tagged else colors[i % len(colors)]
        seed = _rl_seed(path.stem)
        style = dict(marker="os^D"[seed % 4] if seed is not None else "o", label=path.stem, color=color,
                     linestyle="--" if path.stem.startswith("warm_start") else "-")
        hired.plot(sizes, [last[k]["team_size_mean"] for k in sizes], **style)
        solved.plot(sizes, [at[k]["useful_work"] for k in sizes], **style)
    if not plotted:
        raise SystemExit(f"nothing to plot: no result has a row at {limit:g} s")
    ends = [min(plotted), max(plotted)]
    hired.plot(ends, ends, color="grey", linestyle=":", label="the cap")
    for ax, title in ((hired, "team it hires (CEO included)"), (solved, f"items solved by {limit:g} s")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(plotted))
        ax.set_xticklabels([str(k) for k in sorted(plotted)])
        ax.set_xlabel("team cap (CEO included); trained at 9")
        ax.set_title(title)
        ax.axvline(9, color="grey", linewidth=0.8)
        ax.grid(alpha=0.3)
    solved.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", type=Path)
    ap.add_argument("--plot", type=Path, help="also write this PNG")
    ap.add_argument("--limit", type=float, default=4.5, help="the limit of the plot's items panel (s)")
    ap.add_argument("--gains", type=int, metavar="SIZE",
                    help="print only each run's items at team SIZE against the best team at the cap of 9")
    args = ap.parse_args()
    if args.gains:
        print("\n".join(gains(args.results, args.gains)))
        return
    for path in args.results:
        print("\n".join(table(path)))
    if args.plot:
        plot(args.results, args.plot, args.limit)


if __name__ == "__main__":
    main()
