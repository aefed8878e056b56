set -euo pipefail
cd /work/main
S=.venv/bin/swarmrl
WS=$HOME/.cache/swarmrl/warmstart-48183c7887eb2757
D=benchmarks/small_teams/max_chain2_p48
G=(--team-sizes 1,2,4,8,9 --time-limits 4.5,5,5.5,6,6.5,7,7.5,8,9,10,12,14,16,18,20 --problems 48)
for s in 1 2; do
  $S train rlcr_arith seed=$s run.progress=false --init $WS --out runs/c2_s$s --overwrite > /tmp/chain2/train_s$s.log 2>&1
  $S scale runs/c2_s$s "${G[@]}" --greedy --out $D/rl_seed${s}_greedy > /dev/null 2>&1
  $S scale runs/c2_s$s "${G[@]}" --out $D/rl_seed${s}_sampled > /dev/null 2>&1
done
.venv/bin/python benchmarks/scale_checks.py --warm-start $D/warm_start_greedy $D/rl_seed1_greedy $D/rl_seed2_greedy --json $D/checks_seeds_greedy.json
.venv/bin/python benchmarks/scale_checks.py --warm-start $D/warm_start_sampled $D/rl_seed1_sampled $D/rl_seed2_sampled --json $D/checks_seeds_sampled.json
