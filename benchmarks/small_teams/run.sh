#!/usr/bin/env bash
# Do small teams stay trained? The warm start, the demo's checkpoint (the default: a quarter of
# each step's groups are told a cap of 0, 1 or 3 experts, rl.smaller_caps_fraction=0.25,
# rl.smaller_caps=0,1,3) and RLCR as published (every CEO may hire 8: fraction 0), each through
# `swarmrl scale` on the same 24 held-out problems and limits, and both full teams evaluated as
# the demo does. Needs the demo's run (swarmrl demo; DEMO=dir to use another) and its cached
# warm start. About 14 minutes on 2 cores besides the demo. previous_default/ holds the same
# grid on the 8-item default (5.5 -> 6 s, no board), with fractions 0.5 and 0.25.
set -euo pipefail
cd "$(dirname "$0")/../.."
S=.venv/bin/swarmrl
GRID=(--team-sizes 1,2,4,8 --time-limits 4.5,5.5,8,12,16,20 --problems 24)
WS=$(.venv/bin/python benchmarks/warm_start_path.py rlcr_arith)
DEMO=${DEMO:-runs/demo}
$S train rlcr_arith rl.smaller_caps_fraction=0 run.checkpoint_every=0 run.samples_per_step=2 \
    run.progress=false --out runs/caps_off --overwrite
$S scale runs/caps_off "${GRID[@]}" --out benchmarks/small_teams/caps_off
$S scale "$DEMO" "${GRID[@]}" --out benchmarks/small_teams/demo
$S eval "$DEMO" --time-limit 5.5 --problems 48
$S eval runs/caps_off --time-limit 5.5 --problems 48
$S scale "$WS" --config configs/rlcr_arith.yaml "${GRID[@]}" --out benchmarks/small_teams/warm_start
