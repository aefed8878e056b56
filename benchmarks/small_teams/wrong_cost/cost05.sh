#!/usr/bin/env bash
# RL seeds 0-4 (0: the demo's) from the demo's warm start with half a wrong answer's cost
# (shaping.wrong_cost 0.5), read with checks.sh into cost05/ (about 25 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/../../.."
WS=$(.venv/bin/python benchmarks/warm_start_path.py rlcr_arith)
for s in 0 1 2 3 4; do
  .venv/bin/swarmrl train rlcr_arith seed=$s shaping.wrong_cost=0.5 rl.demo_anchor_coef=0 rl.smaller_caps=0,1,3 run.progress=false --init "$WS" --out runs/wc05_s$s --overwrite > /dev/null
  RUN=runs/wc05_s$s NAME=rl_seed${s}_cost05 OUT=benchmarks/small_teams/wrong_cost/cost05 bash benchmarks/small_teams/max_chain2_p48/checks.sh
done
