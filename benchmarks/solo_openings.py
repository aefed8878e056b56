"""How a run's single agent opens, and what each opening costs: the first reply of every solo
rollout on the scaling grid's held-out problems, with item labels folded to `X`, and the items
it solves by the horizon.

    .venv/bin/python benchmarks/solo_openings.py RUN [RUN ...] [--config RUN/config.yaml] [--greedy] [--problems 48] [--horizon 18] [--json OUT]

A perfect single agent takes every item in its first turn (`<take item="A-L"/>`, the scripted
solo demonstration). A team's CEO opens otherwise: it takes single items (`<take item="X"/>`,
the board's longest chain) and hires. A solo agent that opens like a CEO has taken one item, and
is done when it is solved (`(no items left)`). The rollouts are those of `swarmrl scale RUN
--team-sizes 1,2,4,8,9` at one limit (`team_losses.grid_rollouts`), so the draw is the grid's.
`--config` plays a bare model directory (a warm start) under a run's config.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

from team_losses import grid_rollouts  # run as a script: benchmarks/ is on the path

LABEL = re.compile(r'item="[A-Z]+"')
GRID_TEAMS = [1, 2, 4, 8, 9]  # the headline grid's batch, whose draw the solo rollouts share


def opening(reply: str, width: int = 60) -> str:
    """A first reply with single item labels folded (`item="C"` -> `item="X"`; ranges stay)."""
    return LABEL.sub('item="X"', reply)[:width]


def openings(rollouts: list) -> dict[str, dict]:
    """Per opening: rollouts, their mean items solved, and their share of all rollouts."""
    solved = defaultdict(list)
    for r in rollouts:
        solved[opening(r.turns[0].reply) if r.turns else "(no turn)"].append(len(r.solved))
    n = max(len(rollouts), 1)
    return {k: {"rollouts": len(v), "share": len(v) / n, "items_solved_mean": sum(v) / len(v)}
            for k, v in sorted(solved.items(), key=lambda kv: -len(kv[1]))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--config", type=Path, help="the config to play under (default RUN/config.yaml)")
    ap.add_argument("--greedy", action="store_true")
    ap.add_argument("--problems", type=int, default=48)
    ap.add_argument("--horizon", type=float, default=18.0, help="simulated seconds")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    out = {}
    for run in args.runs:
        solo = grid_rollouts(run, args.config, GRID_TEAMS, args.horizon, args.problems, args.greedy)[1]
        out[str(run)] = {"score_mean": sum(r.score for r in solo) / len(solo), "openings": openings(solo)}
        print(f"{run}: score {out[str(run)]['score_mean']:.3f} at {args.horizon:g} s")
        for k, v in out[str(run)]["openings"].items():
            print(f"  {v['rollouts']:3d} ({v['share']:.0%})  {v['items_solved_mean']:5.2f} items  {k!r}")
    if args.json:
        args.json.write_text(json.dumps({"greedy": args.greedy, "problems": args.problems,
                                         "horizon_s": args.horizon, "runs": out}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
