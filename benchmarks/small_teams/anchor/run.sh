#!/usr/bin/env bash
# The demo's recipe before the anchor joined it (smaller caps 0, 1, 3) with scripted solo
# demonstrations in the update (rl.demo_anchor_coef=COEF, 1 when not given), RL seeds 0-4 from the
# demo's warm start, read as eval_noise/run.sh reads the recipe without them (about 35 minutes on
# 2 cores). Today's preset is `run.sh 0.5 open2 rl.smaller_caps=0,1,3,7 rl.demo_anchor_opening_coef=2`
# (seed 0: the demo's run):
#   1. trains runs/anchor_s0..4 (coefficient 1) or runs/anchor_cCOEF_s0..4 where they are missing;
#   2. sampled: benchmarks/eval_noise.py, 8 draws of each run and of the warm start -> sampled.json, sampled.png;
#   3. the greedy headline checks of each run on the default problems, against the warm start's greedy
#      grid that eval_noise/run.sh recorded (problem_sets/ps1000003_warm_start) -> greedy/.
# Results go to benchmarks/small_teams/anchor/ (coefficient 1) or its subfolder coef_COEF/; with TAG
# and overrides after the coefficient, runs/anchor_cCOEF_TAG_s0..4 and coef_COEF_TAG/.
#   bash benchmarks/small_teams/anchor/run.sh [COEF [TAG key=value ...]]
set -euo pipefail
cd "$(dirname "$0")/../../.."
COEF=${1:-1}
TAG=${2:-}
if [ -n "$TAG" ]; then NAME=anchor_c${COEF}_$TAG; OUT=benchmarks/small_teams/anchor/coef_${COEF}_$TAG
elif [ "$COEF" = 1 ]; then NAME=anchor; OUT=benchmarks/small_teams/anchor
else NAME=anchor_c$COEF; OUT=benchmarks/small_teams/anchor/coef_$COEF; fi
mkdir -p $OUT/greedy
WS=$(.venv/bin/python benchmarks/warm_start_path.py rlcr_arith)
RUNS=($(bash benchmarks/small_teams/train_seeds.sh $NAME rl.demo_anchor_coef=$COEF rl.smaller_caps=0,1,3 "${@:3}"))
.venv/bin/python benchmarks/eval_noise.py "${RUNS[@]}" --warm-start "$WS" --draws 8 \
  --json $OUT/sampled.json --plot $OUT/sampled.png
WSG=benchmarks/small_teams/eval_noise/problem_sets/ps1000003_warm_start
for s in 0 1 2 3 4; do
  .venv/bin/swarmrl scale runs/${NAME}_s$s --team-sizes 1,2,4,8,9 \
    --time-limits 4.5,5,5.5,6,6.5,7,7.5,8,9,10,12,14,16,18,20 --problems 48 --greedy \
    --out $OUT/greedy/${NAME}_s$s > /dev/null
  .venv/bin/python benchmarks/scale_checks.py --warm-start $WSG $OUT/greedy/${NAME}_s$s \
    --json $OUT/greedy/checks_${NAME}_s$s.json
done
rm -f $OUT/greedy/*/*.png
