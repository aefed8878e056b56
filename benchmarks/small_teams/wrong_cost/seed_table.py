"""The headline checks of every RL seed read so far, by a wrong answer's cost (0, 0.5, 1; and 1 with
twice the RL steps, rl80.sh), from the checks.sh records (`scale_checks.py` JSON) of the demo's warm start (`warmstart-25c82b3e40945aa0`).

    .venv/bin/python benchmarks/small_teams/wrong_cost/seed_table.py [--json F]

Per cost and seed, greedy and sampled at T=1: the best team's items at 4.5 s over the perfect
single agent's, the latency at which the team first scores 1.0 over the perfect single agent's
(None: never by 20 s), and the worst of teams 1, 2 and 4 minus the warm start over the grid's
limits. Then, per cost, how many seeds pass each check (3x; 1.0 by 0.4x; small teams within 0.05).
Seed 0 is the demo's own seed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent  # benchmarks/small_teams
# cost -> seed -> the checks file's stem (without _greedy / _sampled)
RECORDS = {
    "0": {0: ROOT / "draft_tokens_p48/checks_trained", 1: ROOT / "draft_tokens_p48/checks_rl_seed1",
          2: ROOT / "draft_tokens_p48/checks_rl_seed2", 3: HERE / "seeds34/checks_rl_seed3_cost0",
          4: HERE / "seeds34/checks_rl_seed4_cost0"},
    "0.5": {s: HERE / f"cost05/checks_rl_seed{s}_cost05" for s in range(5)},
    "1": {0: HERE / "checks_trained", 1: HERE / "checks_rl_seed1", 2: HERE / "checks_rl_seed2",
          3: HERE / "seeds34/checks_rl_seed3_cost1", 4: HERE / "seeds34/checks_rl_seed4_cost1"},
    "1, 80 steps": {s: HERE / f"rl80/checks_rl_seed{s}_steps80" for s in range(3)},  # rl80.sh
}


def read(stem: Path, mode: str) -> dict | None:
    path = stem.with_name(f"{stem.name}_{mode}.json")
    if not path.exists():
        return None
    c = next(iter(json.loads(path.read_text()).values()))
    return {"x_perfect": c["x_perfect"], "reach_ratio": c["reach_ratio"],
            "worst_small": min(c["worst_minus_warm_start"].values())}


def passes(row: dict) -> dict:
    return {"3x": row["x_perfect"] >= 3.0,
            "1.0 by 0.4x": row["reach_ratio"] is not None and row["reach_ratio"] <= 0.4,
            "small teams": row["worst_small"] >= -0.05}


def fmt(row: dict | None) -> str:
    if row is None:
        return "(not run)"
    reach = "never" if row["reach_ratio"] is None else f"{row['reach_ratio']:.3f}x"
    return f"{row['x_perfect']:.2f}x, 1.0 {reach}, small {row['worst_small']:+.3f}"


def main() -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json")
    args = ap.parse_args()
    table, counts = {}, {}
    for cost, seeds in RECORDS.items():
        for seed, stem in seeds.items():
            for mode in ("greedy", "sampled"):
                row = read(stem, mode)
                table.setdefault(cost, {}).setdefault(str(seed), {})[mode] = row
                print(f"cost {cost:>11}  seed {seed}  {mode:7}  {fmt(row)}")
                if row is not None:
                    tally = counts.setdefault(cost, {}).setdefault(mode, {"seeds": 0})
                    tally["seeds"] += 1
                    for check, ok in passes(row).items():
                        tally[check] = tally.get(check, 0) + int(ok)
    for cost, modes in counts.items():
        for mode, tally in modes.items():
            n = tally.pop("seeds")
            print(f"cost {cost:>11}  {mode:7}  " + ", ".join(f"{k} {v} of {n}" for k, v in tally.items()))
            tally["seeds"] = n
    out = {"rows": table, "passes": counts}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
