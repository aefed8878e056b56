"""Rollout throughput: the collective runtime vs one plain batched `model.generate`.

Both run in the same process, on the same model, back to back:
  runtime  : one RL step's rollouts of the demo config, generated tokens / wall s. Turns are
             decoded by continuous batching (a rollout's next causal wave joins the running
             batch as soon as its own turns are back; an agent's next prompt reuses its KV
             cache); `--waves` measures the older loop (one sampler call per global wave);
  baseline : one `model.generate` over the same number of sequences (= turns) with the
             same mean prompt length, forced to produce the same number of tokens.
The ratio runtime / baseline is what the orchestration costs (target >= 0.8). Each repeat's
draft tables (sampler.draft_tokens) start from the previous repeat's turns, as each RL step's
start from the previous step's (rl/trainer.py); an untimed step first builds the first repeat's.

    .venv/bin/python benchmarks/rollout_throughput.py [--init DIR] [--repeats 3] [key=value ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from swarmrl.cli import DEMO_CONFIG, resolve_config
from swarmrl.config import load_config
from swarmrl.policy.actor import LLMActor
from swarmrl.policy.model import load_policy
from swarmrl.policy.speculative import draft_corpus
from swarmrl.policy.warmstart import warm_start
from swarmrl.build import make_runtime, max_experts_for


def run_runtime(cfg, policy, seed: int, waves: bool = False, corpus=None) -> tuple[dict, object]:
    """(the measurement, the draft corpus of these rollouts for the next repeat)."""
    runtime, task = make_runtime(cfg, policy.tokenizer)
    problems = task.sample(np.random.default_rng([cfg.seed, seed]), cfg.rl.problems_per_step)
    rollouts = [runtime.new_rollout(g * cfg.rl.rollouts_per_problem + j, g, p, cfg.time_limit.end, max_experts_for(cfg))
                for g, p in enumerate(problems) for j in range(cfg.rl.rollouts_per_problem)]
    actor = LLMActor.from_config(cfg.sampler, policy)
    if corpus is not None:
        actor.draft_corpus = corpus
    calls = []  # rows in the batch at each decode step (the stream) or per sampler call (waves)
    if waves:
        inner = actor.act
        actor.open_stream = lambda: None

        def counting_act(requests, seed):
            calls.append(len(requests))
            return inner(requests, seed)

        actor.act = counting_act
    else:
        open_stream = actor.open_stream

        def counting_stream():
            stream = open_stream()
            step = stream.step

            def counting_step():
                calls.append(len(stream.stream.rows))
                return step()

            stream.step = counting_step
            return stream

        actor.open_stream = counting_stream
    t0 = time.perf_counter()
    runtime.run(rollouts, actor, seed=seed)
    wall = time.perf_counter() - t0
    turns = [t for r in rollouts for t in r.turns]
    return {"wall_s": wall, "generated_tokens": actor.generated_tokens, "sequences": len(turns),
            "calls": len(calls), "mean_batch": float(np.mean(calls)),
            "mean_prompt_tokens": float(np.mean([t.context_tokens for t in turns])),
            "tokens_per_s": actor.generated_tokens / wall}, draft_corpus(rollouts)


@torch.no_grad()
def run_baseline(policy, sequences: int, new_tokens: int, prompt_tokens: int, max_batch: int, seed: int) -> dict:
    model = policy.model.eval()
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    total = 0
    for start in range(0, sequences, max_batch):
        b = min(max_batch, sequences - start)
        ids = torch.randint(0, policy.end_id, (b, prompt_tokens))
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True, top_k=None,
                             top_p=None, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                             pad_token_id=policy.pad_id, eos_token_id=policy.end_id, output_scores=True,
                             return_dict_in_generate=True)
        total += (out.sequences.shape[1] - prompt_tokens) * b
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "generated_tokens": total, "tokens_per_s": total / wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--init", help="policy dir (default: the cached demo warm start, trained if missing)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", help="write results here")
    ap.add_argument("--waves", action="store_true", help="the wave-by-wave loop instead of continuous batching")
    args, overrides = ap.parse_known_args()
    cfg = load_config(resolve_config(DEMO_CONFIG), overrides)
    torch.set_num_threads(cfg.run.threads)
    policy = load_policy(args.init or warm_start(cfg))
    ratios, rows = [], []
    _, corpus = run_runtime(cfg, policy, seed=10_000, waves=args.waves)
    for rep in range(args.repeats):
        rt, corpus = run_runtime(cfg, policy, seed=rep, waves=args.waves, corpus=corpus)
        g = max(1, round(rt["generated_tokens"] / rt["sequences"]))
        base = run_baseline(policy, rt["sequences"], g, max(1, int(rt["mean_prompt_tokens"])), 256, rep)
        ratios.append(rt["tokens_per_s"] / base["tokens_per_s"])
        rows.append({"runtime": rt, "baseline": base, "ratio": ratios[-1]})
        print(f"repeat {rep}: runtime {rt['tokens_per_s']:.0f} tok/s ({rt['sequences']} turns in "
              f"{rt['calls']} {'sampler calls' if args.waves else 'decode steps'}, mean batch {rt['mean_batch']:.1f}) | baseline "
              f"{base['tokens_per_s']:.0f} tok/s | ratio {ratios[-1]:.2f}")
    print(f"median ratio runtime/baseline: {statistics.median(ratios):.2f} (target >= 0.8)")
    if args.json:
        settings = {"overrides": overrides, "draft_tokens": cfg.sampler.draft_tokens, "repeats": args.repeats,
                    "waves": args.waves, "torch": torch.__version__}
        Path(args.json).write_text(json.dumps({"settings": settings, "repeats": rows,
                                               "median_ratio": statistics.median(ratios)}, indent=2))


if __name__ == "__main__":
    main()
