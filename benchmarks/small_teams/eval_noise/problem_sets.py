"""The greedy headline checks of each RL seed on each held-out problem set, side by side.

Reads `problem_sets/checks_ps{SET}_{RUN}.json` (benchmarks/scale_checks.py's output, written by
run.sh) and prints one line per run: on each problem set, the best team against the perfect
single agent at 4.5 s, the latency share at which a team reaches 1.0 (or "never", with the best
score a team reaches by 20 s), and the small teams' worst difference to the warm start; then how
many sets pass each check.

    .venv/bin/python benchmarks/small_teams/eval_noise/problem_sets.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent / "problem_sets"
NAME = re.compile(r"^checks_ps(\w+?)_(.+)\.json$")


def load(root: Path = HERE) -> dict[str, dict[str, dict]]:
    """run -> problem set -> that run's checks on it."""
    out: dict[str, dict[str, dict]] = defaultdict(dict)
    for path in sorted(root.glob("checks_ps*_*.json")):
        m = NAME.match(path.name)
        if m:  # scale_checks.py writes {grid directory: its checks}
            out[m.group(2)][m.group(1)] = next(iter(json.loads(path.read_text()).values()))
    return dict(out)


def passes(c: dict) -> dict[str, bool]:
    """The issue-15 checks on one grid: 3x the perfect and the own single agent, 1.0 by 0.4x, small teams."""
    return {"3x": c["x_perfect"] >= 3 and c["x_own"] >= 3,
            "1.0 by 0.4x": c["reach_ratio"] is not None and c["reach_ratio"] <= 0.4,
            "small teams": min(c["worst_minus_warm_start"].values()) >= -0.05}


def best_score(grid_dir: Path) -> float | None:
    """The best mean score any team of 2 or more reaches in the grid (what "never" fell short of)."""
    path = grid_dir / "scaling.json"
    if not path.exists():
        return None
    rows = json.loads(path.read_text())["rows"]
    return max(r["score_mean"] for r in rows if r["team_size"] > 1)


def cell(c: dict, grid_dir: Path) -> str:
    reach = f"{c['reach_ratio']:.3f}x" if c["reach_ratio"] is not None else f"never ({best_score(grid_dir):.4f})"
    worst = min(c["worst_minus_warm_start"].values())
    return f"{c['x_perfect']:.2f}x, {reach}, {worst:+.3f}"


def _set_order(item: tuple[str, dict]) -> tuple[int, str]:
    """The default held-out set (task.eval_seed 1000003) first, then the others by seed."""
    ps = item[0]
    return (0 if ps == "1000003" else 1, ps.zfill(12))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    table = load()
    summary = {}
    for run, sets in table.items():
        counts = defaultdict(int)
        for ps, c in sorted(sets.items(), key=_set_order):
            for k, ok in passes(c).items():
                counts[k] += ok
        summary[run] = {"sets": len(sets), **counts}
        print(f"{run}: " + " | ".join(f"set {ps}: {cell(c, HERE / f'ps{ps}_{run}')}"
                                      for ps, c in sorted(sets.items(), key=_set_order)))
        print("    passing: " + ", ".join(f"{k} {v} of {len(sets)}" for k, v in counts.items()))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
