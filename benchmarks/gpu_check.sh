#!/usr/bin/env bash
# GPU check of the vLLM engine (sampler.engine=vllm). Needs a CUDA GPU; NOT run on the CPU
# machines this project is developed on.
#
# 1. installs the `vllm` extra into .venv (scripts/setup.sh first if there is no .venv);
# 2. trains 3 steps of the voting workflow with an isolated (per-role LoRA) policy and the
#    tiny model through vLLM (every role's adapter served by one engine, adapters published
#    to it after each update);
# 3. trains the same 3 steps with the hf engine and prints both samplers' generated
#    tokens per second (metrics.jsonl `tokens_per_s`, rollout phase only).
#
#     bash benchmarks/gpu_check.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/gpu_check}
PY=.venv/bin/python

nvidia-smi -L || { echo "gpu_check: no NVIDIA GPU visible" >&2; exit 1; }
[ -x "$PY" ] || bash scripts/setup.sh
# vllm pins its own CUDA torch: install it as the extra says (not torch by itself).
$PY -m pip install -q --disable-pip-version-check -e ".[vllm,dev]"
$PY -c "import torch, vllm; assert torch.cuda.is_available(); print('vllm', vllm.__version__, 'torch', torch.__version__, torch.cuda.get_device_name(0))"

COMMON=(configs/tiny_test.yaml workflow.name=voting policy.sharing=isolated policy.lora_rank=8
        rl.steps=3 rl.problems_per_step=4 rl.rollouts_per_problem=4 eval.val_interval=0 run.progress=false)
$PY -m swarmrl.cli pretrain configs/tiny_test.yaml
for engine in vllm hf; do
  $PY -m swarmrl.cli train "${COMMON[@]}" sampler.engine=$engine --out "$OUT/$engine" --overwrite
done
# tiny vLLM check beside training: log-probs returned by vLLM match the learner's recomputation
$PY -m pytest -q -m gpu tests/distributed

$PY - "$OUT" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
rate = {}
for engine in ("vllm", "hf"):
    rows = [json.loads(l) for l in (out / engine / "metrics.jsonl").read_text().splitlines() if l.strip()]
    assert len(rows) == 3, f"{engine}: {len(rows)} steps"
    rate[engine] = sum(r["tokens_per_s"] for r in rows[1:]) / max(len(rows) - 1, 1)  # step 0 includes engine warm-up
    print(f"{engine:5s} tokens/s per step: {[round(r['tokens_per_s'], 1) for r in rows]}  score_mean: {[round(r['score_mean'], 3) for r in rows]}")
print(f"sampler tokens/s (steps 1-2): vllm {rate['vllm']:.1f}  hf {rate['hf']:.1f}  ratio {rate['vllm'] / rate['hf']:.2f}x")
PY
