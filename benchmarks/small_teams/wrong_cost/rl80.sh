#!/usr/bin/env bash
# Twice the RL: 80 steps with the deadline ramped over all of them (the demo's 40), RL seeds 0-2
# from the demo's warm start with its cost, read with checks.sh into rl80/ (about 30 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/../../.."
WS=$(.venv/bin/python benchmarks/warm_start_path.py rlcr_arith)
for s in 0 1 2; do
  .venv/bin/swarmrl train rlcr_arith seed=$s rl.steps=80 rl.demo_anchor_coef=0 rl.smaller_caps=0,1,3 time_limit.ramp_steps=80 run.progress=false --init "$WS" --out runs/rl80_s$s --overwrite > /dev/null
  RUN=runs/rl80_s$s NAME=rl_seed${s}_steps80 OUT=benchmarks/small_teams/wrong_cost/rl80 bash benchmarks/small_teams/max_chain2_p48/checks.sh
done
