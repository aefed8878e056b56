#!/usr/bin/env bash
# The issue-15 checks on a demo run (README: "The headline checks on the demo's run"): the run's
# grids, greedy and sampled, against its warm start's (kept in OUT, recomputed when another warm start
# is current).
#   RUN=runs/demo NAME=trained bash benchmarks/small_teams/max_chain2_p48/checks.sh
# TEAMS picks the team sizes (default 1,2,4,8,9); keep 1 in it (the own-single-agent ratio), and
# give each TEAMS its own OUT (the warm start's grid there is reused).
set -euo pipefail
cd "$(dirname "$0")/../../.."
S=.venv/bin/swarmrl
RUN=${RUN:-runs/demo}; NAME=${NAME:-trained}; OUT=${OUT:-benchmarks/small_teams/max_chain2_p48}
WS=$(.venv/bin/python benchmarks/warm_start_path.py "$RUN/config.yaml")
WS_SHA=$(.venv/bin/python -c "from pathlib import Path; from swarmrl.runs.manifest import weights_digest; print(weights_digest([Path('$WS')]))")
TEAMS=${TEAMS:-1,2,4,8,9}
G=(--team-sizes $TEAMS --time-limits 4.5,5,5.5,6,6.5,7,7.5,8,9,10,12,14,16,18,20 --problems 48)
for mode in greedy sampled; do
  flag=(); [ $mode = greedy ] && flag=(--greedy)
  # the cached warm-start grid counts only if it scored these warm-start weights (scaling.json's
  # source: one cache key trains other weights on a CPU that rounds differently) at these team sizes
  scored=$(.venv/bin/python -c "import json,sys; d=json.load(open(sys.argv[1])); print(d.get('source', {}).get('weights_sha256', ''), ','.join(map(str, sorted({r['team_size'] for r in d['rows']}))))" $OUT/warm_start_$mode/scaling.json 2>/dev/null || true)
  want=$(.venv/bin/python -c "import sys; print(sys.argv[1], ','.join(map(str, sorted(map(int, sys.argv[2].split(','))))))" "$WS_SHA" "$TEAMS")
  [ "$scored" = "$want" ] || $S scale "$WS" --config $RUN/config.yaml "${G[@]}" "${flag[@]}" --out $OUT/warm_start_$mode > /dev/null
  $S scale "$RUN" "${G[@]}" "${flag[@]}" --out $OUT/${NAME}_$mode > /dev/null
  .venv/bin/python benchmarks/scale_checks.py --warm-start $OUT/warm_start_$mode $OUT/${NAME}_$mode --json $OUT/checks_${NAME}_$mode.json
done
