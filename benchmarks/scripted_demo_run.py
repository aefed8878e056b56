"""A demo-sized run directory from scripted rollouts, for benchmarks/report_bench.py when the demo
itself (about 20 minutes of training) is not at hand: 60 steps of the demo's task, clock and team
cap (configs/rlcr_arith.yaml), PER_STEP rollouts a step (4: the default run.samples_per_step; 32:
run.samples_keep_all=true), strategies drawn as the warm start's demonstrations are; metrics rows
copied from METRICS_ROW_FILE's first row (any run's metrics.jsonl) with the step and score set.

    python benchmarks/scripted_demo_run.py OUT PER_STEP METRICS_ROW_FILE
"""
import json, sys
from pathlib import Path
import numpy as np
from swarmrl.config import load_config
from swarmrl.collective.runtime import Runtime, RuntimeLimits
from swarmrl.collective.clock import LatencyModel
from swarmrl.policy.tokenizer import build_tokenizer
from swarmrl.tasks.arith import ArithTask
from swarmrl.tasks.arith_scripts import sample_strategy
from swarmrl.report.samples import sample_row
out, per_step, metrics_file = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
cfg = load_config("configs/rlcr_arith.yaml")
tok = build_tokenizer(); end = tok.convert_tokens_to_ids("<|end|>")
c = cfg.clock
rt = Runtime(ArithTask(cfg.task), tok, LatencyModel(c.call_overhead_s, c.prefill_tokens_per_s, c.decode_tokens_per_s, c.message_latency_s),
             RuntimeLimits(max_new_tokens_per_turn=64))
base = json.loads(open(metrics_file).readline())
(out / "samples").mkdir(parents=True, exist_ok=True)
rows = []
for step in range(60):
    rng = np.random.default_rng(step)
    probs = rt.task.sample(rng, per_step)
    rs = [rt.new_rollout(i, i, p, 6.0, 8) for i, p in enumerate(probs)]
    rt.run(rs, rt.task.scripts().org_actor(tok, end, {i: sample_strategy(rng, 8) for i in range(per_step)}), seed=step)
    samples = [sample_row(r, lambda ids: tok.decode(ids), rt.task.parse_item) for r in rs]
    (out / "samples" / f"step_{step:04d}.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    rows.append({**base, "step": step, "score_mean": float(np.mean([r.score for r in rs]))})
(out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
(out / "config.yaml").write_text("workflow: {name: org}\ntask: {name: arith}\n")
