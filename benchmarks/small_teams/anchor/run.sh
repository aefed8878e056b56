#!/usr/bin/env bash
# The demo's recipe with scripted solo demonstrations in the update (rl.demo_anchor_coef=1), RL
# seeds 0-4 from the demo's warm start, read as eval_noise/run.sh reads the recipe without them
# (about 45 minutes on 2 cores):
#   1. trains runs/anchor_s0..4 where they are missing;
#   2. sampled: benchmarks/eval_noise.py, 8 draws of each run and of the warm start -> sampled.json, sampled.png;
#   3. the headline checks of each run, greedy and sampled, on the default problems (checks.sh) -> checks/.
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=benchmarks/small_teams/anchor
WS=$(.venv/bin/python benchmarks/warm_start_path.py rlcr_arith)
RUNS=($(bash benchmarks/small_teams/train_seeds.sh anchor rl.demo_anchor_coef=1))
.venv/bin/python benchmarks/eval_noise.py "${RUNS[@]}" --warm-start "$WS" --draws 8 \
  --json $OUT/sampled.json --plot $OUT/sampled.png
for s in 0 1 2 3 4; do
  RUN=runs/anchor_s$s NAME=anchor_s$s OUT=$OUT/checks bash benchmarks/small_teams/max_chain2_p48/checks.sh
done
rm -f $OUT/checks/*/*.png
