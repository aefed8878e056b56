#!/usr/bin/env bash
# The issue-15 checks on a demo run: RUN=dir OUT=dir bash checks.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
S=.venv/bin/swarmrl
RUN=${RUN:-runs/demo}; OUT=${OUT:-benchmarks/small_teams/max_chain2_p48}
WS=$(.venv/bin/python -c "import json;print(json.load(open('$RUN/demo_summary.json'))['warm_start_dir'])" 2>/dev/null || true)
[ -n "$WS" ] || WS=$(.venv/bin/python -c "from swarmrl.api import config_of; from swarmrl.policy.warmstart import warm_start; print(warm_start(config_of('$RUN/config.yaml'), log=lambda *a, **k: None))")
echo "warm start: $WS"
G=(--team-sizes 1,2,4,8,9 --time-limits 4.5,5,5.5,6,6.5,7,7.5,8,9,10,12,14,16,18,20 --problems 48)
$S scale "$RUN" "${G[@]}" --greedy --out $OUT/trained_greedy > /dev/null
$S scale "$WS" --config $RUN/config.yaml "${G[@]}" --greedy --out $OUT/warm_start_greedy > /dev/null
.venv/bin/python benchmarks/scale_checks.py --warm-start $OUT/warm_start_greedy $OUT/trained_greedy --json $OUT/checks_greedy.json
$S scale "$RUN" "${G[@]}" --out $OUT/trained_sampled > /dev/null
$S scale "$WS" --config $RUN/config.yaml "${G[@]}" --out $OUT/warm_start_sampled > /dev/null
.venv/bin/python benchmarks/scale_checks.py --warm-start $OUT/warm_start_sampled $OUT/trained_sampled --json $OUT/checks_sampled.json
