"""One markdown table from `benchmarks/village_to_city.py` results: per file and team cap, the
team hired (the CEO included) and of it the hires experts made, then items solved at each limit.
With `--plot PNG`, also a figure: the team hired and the items solved at `--limit` against the
cap, one line per file.

    python benchmarks/village_to_city_table.py benchmarks/village_to_city_span/*.json [--plot F.png --limit 4.5]

Files without `rows` (e.g. a scripted-ceilings JSON beside them) are skipped.
"""

from __future__ import annotations

import argparse
import json
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


def plot(paths: list[Path], out: Path, limit: float) -> None:
    """Team hired and items solved at `limit` against the team cap, one line per result file."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (hired, solved) = plt.subplots(1, 2, figsize=(13, 4.2))
    colors = plt.get_cmap("tab20").colors  # enough for a dozen results without a repeat
    plotted: set[int] = set()
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
        # warm starts dashed, so a run and the prior it came from read apart
        style = dict(marker="o", label=path.stem, color=colors[i % len(colors)],
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
    args = ap.parse_args()
    for path in args.results:
        print("\n".join(table(path)))
    if args.plot:
        plot(args.results, args.plot, args.limit)


if __name__ == "__main__":
    main()
