#!/usr/bin/env bash
# Village to city with a span of control (workflow.span): the warm start shows two-level trees,
# RL trains at the demo's cap of 8 experts with a span of 4 (the CEO hires 4, each of them 1; two
# seeds), of 2 (the CEO hires 2, each of them 3), or one drawn per problem (rl.spans; two seeds),
# and every run is evaluated at caps up to 64 with a span of 8 (quotas of 8 and 7), greedy, on
# 24 held-out 12-item problems; the flat demo recipe's runs are evaluated at the same caps.
# About 30 minutes on 2 cores from nothing cached: two warm starts and five RL runs (3.5 min each),
# then 6 minutes of evaluations.
# OUT=dir (default this directory); FLAT_RUNS="runs/demo runs/c2_s1" (flat RL runs to compare,
# e.g. the demo's and benchmarks/small_teams/max_chain2_p48/seeds.sh's; missing ones are skipped).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-benchmarks/village_to_city_span}
FLAT_RUNS=${FLAT_RUNS:-"runs/demo runs/c2_s1"}
EVAL=(--items 12 --problems 24 --greedy --team-sizes 1,9,13,17,33,65 --time-limits 3,4,4.5,5,6,8,16)
WS_TREES=$(.venv/bin/python benchmarks/warm_start_path.py rlcr_arith workflow.span=8)
WS_FLAT=$(.venv/bin/python benchmarks/warm_start_path.py rlcr_arith)
.venv/bin/python benchmarks/village_to_city.py "$WS_TREES" --config rlcr_arith "${EVAL[@]}" --set workflow.span=8 --out "$OUT/warm_start_trees.json"
.venv/bin/python benchmarks/village_to_city.py "$WS_FLAT" --config rlcr_arith "${EVAL[@]}" --out "$OUT/warm_start_flat.json"
# RL's span at the cap of 8: 4 (4 managers of 1; two seeds), 2 (2 of 3), or drawn per problem.
RUNS=("span4_s0|workflow.span=4 seed=0" "span4_s1|workflow.span=4 seed=1" "span2_s0|workflow.span=2 seed=0"
      "spans_s0|workflow.span=8 rl.spans=1,2,3,4,8 seed=0" "spans_s1|workflow.span=8 rl.spans=1,2,3,4,8 seed=1")
for entry in "${RUNS[@]}"; do
  name=${entry%%|*}; overrides=${entry#*|}
  # shellcheck disable=SC2086  # the overrides are words
  [ -d runs/$name/final ] || .venv/bin/swarmrl train rlcr_arith $overrides run.progress=false \
    --init "$WS_TREES" --out runs/$name --overwrite > /dev/null
  .venv/bin/python benchmarks/village_to_city.py runs/$name "${EVAL[@]}" --set workflow.span=8 --out "$OUT/rl_$name.json"
done
for run in $FLAT_RUNS; do
  if [ -d "$run/final" ]; then
    .venv/bin/python benchmarks/village_to_city.py "$run" "${EVAL[@]}" --out "$OUT/flat_$(basename "$run").json"
  fi
done
# Bigger problems than the model ever read (labels past L): the first flat run on 24 items.
FIRST=${FLAT_RUNS%% *}
if [ -d "$FIRST/final" ]; then
  .venv/bin/python benchmarks/village_to_city.py "$FIRST" --items 24 --problems 8 --greedy --team-sizes 1,9,16,32 \
    --time-limits 4,8,16 --out "$OUT/flat_$(basename "$FIRST")_items24.json"
fi
.venv/bin/python benchmarks/scripted_ceilings.py --hierarchy 9,13,17 --items 12 --problems 24 --limits 4,4.5,5,6,8 \
  --json "$OUT/scripted_items12.json" > "$OUT/scripted_items12.txt"
.venv/bin/python benchmarks/village_to_city_table.py "$OUT"/*.json > "$OUT/table.md"
# The plot keeps the files of the first one's problem size (the 24-item one drops out).
.venv/bin/python benchmarks/village_to_city_table.py "$OUT"/rl_*.json "$OUT"/flat_*.json "$OUT"/warm_start_*.json \
  --plot "$OUT/village_to_city.png" > /dev/null
