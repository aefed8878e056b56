#!/usr/bin/env bash
# Does RL at the cap of 8 cost the big teams items because it trains at 4.5-5.5 s? The board
# recipe's span-4 run from warm-start seed WS_SEED (default 3, whose prior's team of 17 solves
# 18.5 items by 5.5 s and its RL runs 13.0-14.2), trained again with the deadline ramping to END
# seconds (default 6.5) instead of 5.5, then evaluated as ../run.sh evaluates (greedy, 24 held-out
# 24-item problems, teams of 1-33 with a span of 8, and the tree at the cap of 8).
# Then the same sampled at T=1, teams of 9 and 17 and the tree at the cap (sampled/, as ../sampled/).
# About 12 minutes per RL seed on 2 cores with the warm start cached (../run.sh makes it).
# SEEDS="0" (RL seeds), WS_SEED=3, END=6.5.
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=benchmarks/village_to_city_items24/longer_deadline
SEEDS=${SEEDS:-0}
WS_SEED=${WS_SEED:-3}
END=${END:-6.5}
ITEMS=task.items_per_problem=24
EVAL=(--items 24 --problems 24 --greedy --team-sizes 1,9,13,17,25,33 --time-limits 4.5,5.5,6.5,8,12)
init=$(.venv/bin/python benchmarks/warm_start_path.py rlcr_arith $ITEMS workflow.span=8 task.board_demo_rate=1 \
  warmstart.epochs=2 warmstart.batch_sequences=4 warmstart.seed=$WS_SEED)
for seed in $SEEDS; do
  tag=ws${WS_SEED}_end${END}_s$seed
  run=runs/items24_span4_board_$tag
  [ -d $run/final ] || .venv/bin/swarmrl train rlcr_arith $ITEMS workflow.span=4 task.board_demo_rate=1 \
    time_limit.end=$END seed=$seed run.progress=false --init "$init" --out $run --overwrite > /dev/null
  [ -f "$OUT/rl_span4_board_$tag.json" ] || .venv/bin/python benchmarks/village_to_city.py $run "${EVAL[@]}" \
    --set workflow.span=8 --out "$OUT/rl_span4_board_$tag.json"
  [ -f "$OUT/at_cap_span4_board_$tag.json" ] || .venv/bin/python benchmarks/village_to_city.py $run \
    "${EVAL[@]/1,9,13,17,25,33/9}" --set workflow.span=4 --out "$OUT/at_cap_span4_board_$tag.json"
  SAMPLED=(--items 24 --problems 24 --time-limits 4.5,5.5,6.5,8,12)
  [ -f "$OUT/sampled/rl_span4_board_$tag.json" ] || .venv/bin/python benchmarks/village_to_city.py $run \
    "${SAMPLED[@]}" --team-sizes 9,17 --set workflow.span=8 --out "$OUT/sampled/rl_span4_board_$tag.json"
  [ -f "$OUT/sampled/at_cap_span4_board_$tag.json" ] || .venv/bin/python benchmarks/village_to_city.py $run \
    "${SAMPLED[@]}" --team-sizes 9 --set workflow.span=4 --out "$OUT/sampled/at_cap_span4_board_$tag.json"
done
.venv/bin/python benchmarks/village_to_city_table.py "$OUT"/*.json > "$OUT/table.md"
.venv/bin/python benchmarks/village_to_city_table.py "$OUT"/rl_*.json --gains 17 > "$OUT/gains17.md"
.venv/bin/python benchmarks/village_to_city_table.py "$OUT"/sampled/rl_*.json --gains 17 > "$OUT/sampled/gains17.md"
