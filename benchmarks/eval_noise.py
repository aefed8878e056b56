"""The sampled small-team check against the evaluation's own noise.

scale_checks.py reads the small-team check from one sampled grid per policy: for teams of 1, 2
and 4, the lowest score difference to the warm start over every limit of the grid (15 limits,
48 problems). A lowest of 45 noisy differences sits below zero even when nothing changed. This
script measures how far, and whether a trained run's difference is beyond it.

It runs the grid (`swarmrl scale`: teams, limits and problems as checks.sh uses them) for the
warm start and for each trained run once per sampling seed, `--draws D` seeds from
`task.eval_seed` on (draw 0 is the grid checks.sh reads; every draw plays the same held-out
problems: `ScaleSpec.seed`), and reports:

- `null`: the check's reading between two draws of the warm start, over every ordered pair of
  draws: what it reads when nothing changed, and how often that is below -0.05;
- per trained run: the check's reading per draw (trained draw d against warm-start draw d), and
  the difference of the D-draw means at every (team, limit) with its standard error; the worst
  mean difference per team, its limit, and how many standard errors below -0.05 or above it lies.

    .venv/bin/python benchmarks/eval_noise.py --warm-start WS_DIR RUN [RUN ...] [--draws 8]
        [--problems 48] [--json OUT] [--plot OUT.png]

RUN is a run directory (its config scores the warm start too). About 20 s per grid on 2 cores.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
from pathlib import Path

from swarmrl import api

TEAMS = (1, 2, 4)
LIMITS = (4.5, 5, 5.5, 6, 6.5, 7, 7.5, 8, 9, 10, 12, 14, 16, 18, 20)  # checks.sh's grid
TOLERANCE = 0.05  # issue 15: small teams within 0.05 of the warm start

Grid = dict[tuple[int, float], float]  # (team size, limit) -> score_mean


def worst_difference(a: Grid, b: Grid, teams=TEAMS) -> dict[int, float]:
    """scale_checks' small-team statistic: per team, the lowest a - b over the limits."""
    return {n: min(a[k] - b[k] for k in a if k[0] == n) for n in teams}


def null_readings(draws: list[Grid], teams=TEAMS) -> list[dict[int, float]]:
    """The statistic between every ordered pair of distinct draws of one policy."""
    return [worst_difference(a, b, teams) for a, b in itertools.permutations(draws, 2)]


def mean_difference(trained: list[Grid], ws: list[Grid]) -> dict[tuple[int, float], tuple[float, float]]:
    """(team, limit) -> (mean over trained draws - mean over warm-start draws, its standard error),
    the two policies' draws taken as independent samples."""
    out = {}
    for k in trained[0]:
        a, b = [g[k] for g in trained], [g[k] for g in ws]
        se = math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b)) if len(a) > 1 else 0.0
        out[k] = (statistics.fmean(a) - statistics.fmean(b), se)
    return out


def worst_mean(diffs: dict[tuple[int, float], tuple[float, float]], teams=TEAMS) -> dict[int, dict]:
    """Per team: the limit with the lowest mean difference, that difference and its standard error."""
    out = {}
    for n in teams:
        k = min((k for k in diffs if k[0] == n), key=lambda k: diffs[k][0])
        m, se = diffs[k]
        out[n] = {"limit_s": k[1], "mean": m, "se": se, "z_from_tolerance": (m + TOLERANCE) / se if se else None}
    return out


def grid(model: str, config: str | None, seed: int, args) -> Grid:
    res = api.scale(model, team_sizes=args.team_sizes, time_limits_s=args.time_limits, problems=args.problems,
                    config=config, seed=seed, log=lambda *_: None)
    return {(r["team_size"], float(r["time_limit_s"])): r["score_mean"] for r in res.rows}


def _passes(reading: dict[int, float]) -> bool:
    return min(reading.values()) >= -TOLERANCE


def summarize(ws: list[Grid], runs: dict[str, list[Grid]], teams=TEAMS) -> dict:
    null = null_readings(ws, teams)
    out = {"null": {"pairs": len(null), "below_tolerance": sum(not _passes(r) for r in null),
                    "worst_by_team": {n: sorted(r[n] for r in null) for n in teams}},
           "runs": {}}
    for name, draws in runs.items():
        per_draw = [worst_difference(t, w, teams) for t, w in zip(draws, ws)]
        out["runs"][name] = {"per_draw": per_draw, "draws_passing": sum(map(_passes, per_draw)),
                             "worst_mean": worst_mean(mean_difference(draws, ws), teams)}
    return out


def _print(s: dict, draws: int) -> None:
    """The null's pass count and spread, then each run's draws that pass and its worst mean differences."""
    n = s["null"]
    print(f"null (warm start against itself, {n['pairs']} ordered pairs of {draws} draws): "
          f"{n['below_tolerance']} read below -{TOLERANCE}")
    for t, v in n["worst_by_team"].items():
        print(f"  team {t}: lowest {v[0]:+.3f}, median {statistics.median(v):+.3f}")
    for name, r in s["runs"].items():
        print(f"{name}: the check passes on {r['draws_passing']} of {draws} draws; worst mean difference "
              + ", ".join(f"team {t} {w['mean']:+.3f} +- {w['se']:.3f} at {w['limit_s']:g} s"
                          for t, w in r["worst_mean"].items()))


def plot(ws: list[Grid], runs: dict[str, list[Grid]], path: Path, teams=TEAMS) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(teams), figsize=(4.2 * len(teams), 3.4), sharey=True, squeeze=False)
    axes = axes[0]
    for ax, n in zip(axes, teams):
        for name, draws in runs.items():
            d = mean_difference(draws, ws)
            xs = [L for (t, L) in d if t == n]
            m = [d[(n, L)][0] for L in xs]
            se = [d[(n, L)][1] for L in xs]
            line, = ax.plot(xs, m, marker=".", label=name)
            ax.fill_between(xs, [a - 2 * e for a, e in zip(m, se)], [a + 2 * e for a, e in zip(m, se)],
                            color=line.get_color(), alpha=0.15)
        ax.axhline(-TOLERANCE, color="red", lw=0.8, ls="--")
        ax.axhline(0, color="grey", lw=0.6)
        ax.set_title(f"team of {n}")
        ax.set_xlabel("time limit (simulated s)")
    axes[0].set_ylabel(f"mean score - warm start's ({len(ws)} draws, +-2 SE)")
    axes[-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="trained run directories")
    ap.add_argument("--warm-start", required=True, help="the runs' warm-start model directory")
    ap.add_argument("--draws", type=int, default=8, help="sampling seeds per policy (>= 2)")
    ap.add_argument("--problems", type=int, default=48)
    ap.add_argument("--team-sizes", default=",".join(map(str, TEAMS)), help="the small teams the check reads")
    ap.add_argument("--time-limits", default=",".join(map(str, LIMITS)), help="simulated seconds")
    ap.add_argument("--json")
    ap.add_argument("--plot")
    args = ap.parse_args(argv)
    if args.draws < 2:
        ap.error("--draws must be >= 2 (one draw has no noise to measure)")
    args.team_sizes = [int(x) for x in args.team_sizes.split(",")]
    args.time_limits = [float(x) for x in args.time_limits.split(",")]
    config = str(Path(args.runs[0]) / "config.yaml")
    seed0 = api.config_of(config).task.eval_seed
    seeds = [seed0 + d for d in range(args.draws)]
    ws = [grid(args.warm_start, config, s, args) for s in seeds]
    print(f"warm start: {args.draws} draws", file=sys.stderr)
    runs = {}
    for run in args.runs:
        runs[Path(run).name] = [grid(run, None, s, args) for s in seeds]
        print(f"{run}: {args.draws} draws", file=sys.stderr)
    s = summarize(ws, runs, args.team_sizes)
    _print(s, args.draws)
    if args.plot:
        plot(ws, runs, Path(args.plot), args.team_sizes)
    if args.json:
        settings = {"warm_start": args.warm_start, "runs": args.runs, "draws": args.draws, "seeds": seeds,
                    "problems": args.problems, "teams": args.team_sizes, "limits_s": args.time_limits,
                    "tolerance": TOLERANCE}
        grids = {"warm_start": [_rows(g) for g in ws], **{k: [_rows(g) for g in v] for k, v in runs.items()}}
        Path(args.json).write_text(json.dumps({"settings": settings, **_jsonable(s), "grids": grids}, indent=1) + "\n")
    return 0


def _rows(g: Grid) -> list[list[float]]:
    return [[n, L, v] for (n, L), v in sorted(g.items())]


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_jsonable(v) for v in x]
    return x


if __name__ == "__main__":
    sys.exit(main())
