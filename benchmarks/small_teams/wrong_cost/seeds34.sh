#!/usr/bin/env bash
# RL seeds 3 and 4 from the demo's warm start, with and without a wrong answer's cost
# (shaping.wrong_cost 1 and 0), read with checks.sh into seeds34/ (about 18 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/../../.."
WS=$(.venv/bin/python benchmarks/warm_start_path.py rlcr_arith)
for s in 3 4; do
  for c in 1 0; do
    .venv/bin/swarmrl train rlcr_arith seed=$s shaping.wrong_cost=$c rl.demo_anchor_coef=0 rl.smaller_caps=0,1,3 run.progress=false --init "$WS" --out runs/wc${c}_s$s --overwrite > /dev/null
    RUN=runs/wc${c}_s$s NAME=rl_seed${s}_cost$c OUT=benchmarks/small_teams/wrong_cost/seeds34 bash benchmarks/small_teams/max_chain2_p48/checks.sh
  done
done
