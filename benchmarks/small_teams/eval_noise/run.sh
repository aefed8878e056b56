#!/usr/bin/env bash
# The issue-15 checks of RL seeds 0-4 (the demo's recipe from its warm start before the scripted
# solo demonstrations and the cap of 7 joined it: rl.demo_anchor_coef=0 rl.smaller_caps=0,1,3)
# against the evaluation's own noise (about 60 minutes on 2 cores, 15 of them training):
#   1. trains the five runs into runs/eval_noise_s0..4 where they are missing;
#   2. sampled: benchmarks/eval_noise.py, 8 draws of each run and of the warm start on the default
#      problems -> sampled.json, sampled.png;
#   3. greedy (nothing to draw): the checks on the default held-out problems (task.eval_seed 1000003)
#      and on three more sets (task.eval_seed 1, 2, 3), each run and the warm start on the same 48
#      problems -> problem_sets/, tallied by problem_sets.py.
set -euo pipefail
cd "$(dirname "$0")/../../.."
S=.venv/bin/swarmrl
OUT=benchmarks/small_teams/eval_noise
WS=$(.venv/bin/python benchmarks/warm_start_path.py rlcr_arith)
RUNS=($(bash benchmarks/small_teams/train_seeds.sh eval_noise rl.demo_anchor_coef=0 rl.smaller_caps=0,1,3))
.venv/bin/python benchmarks/eval_noise.py "${RUNS[@]}" --warm-start "$WS" --draws 8 \
  --json $OUT/sampled.json --plot $OUT/sampled.png
G=(--team-sizes 1,2,4,8,9 --time-limits 4.5,5,5.5,6,6.5,7,7.5,8,9,10,12,14,16,18,20 --problems 48 --greedy)
P=$OUT/problem_sets
mkdir -p $P
for ps in 1000003 1 2 3; do
  $S scale "$WS" --config "${RUNS[0]}/config.yaml" "${G[@]}" --out $P/ps${ps}_warm_start task.eval_seed=$ps > /dev/null
  for run in "${RUNS[@]}"; do
    name=$(basename "$run")
    $S scale "$run" "${G[@]}" --out $P/ps${ps}_$name task.eval_seed=$ps > /dev/null
    .venv/bin/python benchmarks/scale_checks.py --warm-start $P/ps${ps}_warm_start $P/ps${ps}_$name \
      --json $P/checks_ps${ps}_$name.json
  done
done
rm -f $P/*/*.png
.venv/bin/python $OUT/problem_sets.py --json $OUT/problem_sets.json
