#!/usr/bin/env bash
# Do small teams stay trained? The demo's warm start, the demo's checkpoint (RLCR as published:
# every CEO may hire 8) and a run where half of each step's groups are told a cap of 0, 1 or 3
# experts (rl.smaller_caps_fraction=0.5, rl.smaller_caps=0,1,3), each through `swarmrl scale`
# on the same 24 held-out problems and limits; then a quarter of the groups (fraction 0.25).
# Needs the demo's run in runs/demo (swarmrl demo) and its cached warm start. About 13 minutes
# on 2 cores besides the demo.
set -euo pipefail
cd "$(dirname "$0")/../.."
S=.venv/bin/swarmrl
GRID=(--team-sizes 1,2,4,8 --time-limits 4,5.5,6,8,10,16 --problems 24)
WS=$(.venv/bin/python -c "from swarmrl.api import config_of; from swarmrl.policy.warmstart import warm_start; \
print(warm_start(config_of('rlcr_arith'), log=lambda *a, **k: None))")
$S train rlcr_arith rl.smaller_caps_fraction=0.5 rl.smaller_caps=0,1,3 run.checkpoint_every=0 \
    run.samples_per_step=2 run.progress=false --out runs/caps013 --overwrite
$S scale runs/caps013 "${GRID[@]}" --out benchmarks/small_teams/caps013
$S train rlcr_arith rl.smaller_caps_fraction=0.25 rl.smaller_caps=0,1,3 run.checkpoint_every=0 \
    run.samples_per_step=2 run.progress=false --out runs/caps013_q --overwrite
$S scale runs/caps013_q "${GRID[@]}" --out benchmarks/small_teams/caps013_quarter
$S eval runs/caps013 --time-limit 6 --problems 48      # the full team at the demo's final limit
$S eval runs/caps013_q --time-limit 6 --problems 48
$S scale runs/demo "${GRID[@]}" --out benchmarks/small_teams/demo
$S scale "$WS" --config configs/rlcr_arith.yaml "${GRID[@]}" --out benchmarks/small_teams/warm_start
