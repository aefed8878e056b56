#!/usr/bin/env bash
# RL seeds 1 and 2 from the demo's warm start, read with checks.sh (about 9 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/../../.."
WS=$(.venv/bin/python benchmarks/warm_start_path.py rlcr_arith)
for s in 1 2; do
  .venv/bin/swarmrl train rlcr_arith seed=$s run.progress=false --init "$WS" --out runs/c2_s$s --overwrite > /dev/null
  RUN=runs/c2_s$s NAME=rl_seed$s bash benchmarks/small_teams/max_chain2_p48/checks.sh
done
