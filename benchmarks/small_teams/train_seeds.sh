#!/usr/bin/env bash
# Trains RL seeds 0-4 of the demo's recipe from its warm start into runs/NAME_s0..4 where they are
# missing (seed 0 without overrides is the demo's run), with the given overrides; prints the run
# directories, one per line (about 3 minutes a run on 2 cores).
#   RUNS=($(bash benchmarks/small_teams/train_seeds.sh NAME [key=value ...]))
set -euo pipefail
cd "$(dirname "$0")/../.."
name=$1
shift
WS=$(.venv/bin/python benchmarks/warm_start_path.py rlcr_arith)
for s in 0 1 2 3 4; do
  run=runs/${name}_s$s
  [ -d $run/final ] || .venv/bin/swarmrl train rlcr_arith seed=$s run.progress=false "$@" --init "$WS" --out $run \
    --overwrite > /dev/null
  echo $run
done
