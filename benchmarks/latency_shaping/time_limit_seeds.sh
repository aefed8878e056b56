#!/usr/bin/env bash
# The latency-shaping experiment's time_limit arm alone, on more RL seeds and with extra overrides:
# how much of one experiment's messages and 1.0-by-0.4x readings is its seed. Trains
# runs/ls_tl_TAG_sN (the experiment's overrides, shaping.mode=time_limit, seed N, then the extra
# overrides) where missing, reads its greedy grid against the warm start's
# (benchmarks/scale_checks.py) and prints, per run, messages per rollout as of 4.5 s over the
# first and last 10 steps (the experiment's check) and the checks' line. About 4 minutes a seed.
#   bash benchmarks/latency_shaping/time_limit_seeds.sh TAG "SEEDS" [key=value ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
TAG=$1; SEEDS=$2; shift 2
OUT=benchmarks/latency_shaping/time_limit_seeds
mkdir -p $OUT
WS=$(.venv/bin/python benchmarks/warm_start_path.py rlcr_arith)
G=(--team-sizes 1,2,4,8,9 --time-limits 4.5,5,5.5,6,6.5,7,7.5,8,9,10,12,14,16,18,20 --problems 48 --greedy)
# the warm start's greedy grid, once per warm start (its folder name is its cache key)
WSG=$OUT/warm_start_$(basename "$WS")
for s in $SEEDS; do
  run=runs/ls_tl_${TAG}_s$s
  [ -d $run/final ] || .venv/bin/swarmrl train rlcr_arith rl.smaller_caps_fraction=0 rl.steps=40 \
    shaping.safety_cap_s=20 shaping.penalty_per_s=0.02 run.checkpoint_every=0 run.samples_per_step=2 \
    shaping.mode=time_limit seed=$s run.progress=false "$@" --init "$WS" --out $run --overwrite > /dev/null
  [ -f $WSG/scaling.json ] || .venv/bin/swarmrl scale "$WS" --config $run/config.yaml "${G[@]}" --out $WSG > /dev/null
  .venv/bin/swarmrl scale $run "${G[@]}" --out $OUT/${TAG}_s$s > /dev/null
  .venv/bin/python benchmarks/scale_checks.py --warm-start $WSG $OUT/${TAG}_s$s --json $OUT/checks_${TAG}_s$s.json
  .venv/bin/python - $run/metrics.jsonl <<'PY'
import json, sys
m = [json.loads(line) for line in open(sys.argv[1])]
first, last = (sum(x["ref/messages_per_rollout"] for x in part) / len(part) for part in (m[:10], m[-10:]))
print(f"{sys.argv[1]}: messages as of 4.5 s, first 10 -> last 10 steps: {first:.2f} -> {last:.2f} = {last / first:.2f}x")
PY
done
rm -f $OUT/*/*.png
