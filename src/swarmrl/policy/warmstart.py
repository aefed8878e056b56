"""Warm start: supervised training on scripted demonstrations of *every* strategy.

A tiny model from scratch can only explore what its warm start makes likely. The
demonstrations therefore cover all team sizes 0..max_experts and every coordination
style in comparable amounts (tasks/arith_scripts.py), so the warm-started policy is a
broad prior, as a base model would be, and RL selects within it. Demonstrations run
through the real runtime with no deadline, so their contexts are token-for-token what
the policy will see during RL.

The result is cached under `warmstart.cache_dir`, keyed by a content hash of everything
that determines it (config sections and the source of the code that produces the data).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from swarmrl.collective import runtime as runtime_module
from swarmrl.config import Config, ConfigError
from swarmrl.policy import model as model_module
from swarmrl.policy import tokenizer as tokenizer_module
from swarmrl.policy.model import Policy, build_tiny_policy, load_policy, save_policy
from swarmrl.rl.batch import micro_batches, pad, token_logprobs, TrainSeq
from swarmrl.tasks import arith, arith_scripts
from swarmrl.tasks.arith_scripts import ScriptedActor, Strategy, sample_strategy
from swarmrl.workflows import graph as workflow_graph
from swarmrl.workflows import scripts as workflow_scripts

NO_DEADLINE = 1e9


def demo_set(cfg: Config) -> str:
    """`org`: RLCR's strategies (org and single). `workflows`: every fixed workflow plus a solo
    agent, so all cells of a workflow study (any workflow, sharing mode, the single-agent
    control) start from one base model, as in the paper."""
    return "org" if cfg.workflow.name in ("org", "single") else "workflows"


def warmstart_key(cfg: Config) -> str:
    team = ({"max_experts": cfg.workflow.max_experts} if demo_set(cfg) == "org"
            else {"generators": cfg.workflow.generators, "workers": cfg.workflow.workers})
    parts = {
        "model": cfg.model.__dict__, "task": cfg.task.__dict__, "clock": cfg.clock.__dict__, "demo_set": demo_set(cfg),
        **team, "warmstart": {k: v for k, v in cfg.warmstart.__dict__.items() if k != "cache_dir"},
        "sampler": cfg.sampler.__dict__,
        "code": [inspect.getsource(m) for m in (arith, arith_scripts, runtime_module, tokenizer_module, model_module,
                                                workflow_scripts, workflow_graph)]
                + [inspect.getsource(f) for f in (demonstrations, workflow_demonstrations, supervised)],
        "version": 2,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def demonstrations(cfg: Config, policy: Policy, n_rollouts: int, seed: int) -> tuple[list[TrainSeq], dict]:
    """Run scripted strategies through the runtime; one training sequence per agent."""
    from swarmrl.rl.trainer import make_runtime  # local: trainer imports this package's model
    if demo_set(cfg) == "workflows":
        return workflow_demonstrations(cfg, policy, n_rollouts, seed)
    runtime, task = make_runtime(cfg, policy.tokenizer)
    rng = np.random.default_rng(seed)
    problems = task.sample(rng, n_rollouts)
    strategies, rollouts = {}, []
    n_cap0 = n_rollouts // (cfg.workflow.max_experts + 2)
    for i, p in enumerate(problems):
        if i < n_cap0:
            # A CEO told `max=0` works alone: the scaling evaluation's team size 1. The header's
            # cap is one character ~70 tokens before the first decision, and with only the solo
            # demos that happened to draw cap 0 (~5% of all) the warm start ignored it: measured
            # P(first action is <take> | max=0) = 0.09, the same as for max=8, so the single agent
            # mostly tried to hire and scored 0. A block of its own makes the cap matter.
            strat, cap = Strategy(0, share="recompute"), 0
        else:
            strat = sample_strategy(rng, cfg.workflow.max_experts)
            # Show the cap in the header too: demos with max=m never hire more than m.
            cap = int(rng.integers(strat.experts, cfg.workflow.max_experts + 1))
        strategies[i] = strat
        rollouts.append(runtime.new_rollout(i, i, p, NO_DEADLINE, cap))
    runtime.run(rollouts, ScriptedActor(policy.tokenizer, policy.end_id, strategies), seed=seed)
    seqs = [TrainSeq(a.ids, a.gen_mask, a.logprobs, 0.0, a.role, r.index)
            for r in rollouts for a in r.agents.values() if any(a.gen_mask)]
    stats = {
        "rollouts": n_rollouts,
        "sequences": len(seqs),
        "generated_tokens": sum(sum(s.gen_mask) for s in seqs),
        "team_sizes": dict(sorted(Counter(s.experts + 1 for s in strategies.values()).items())),
        "share_modes": dict(Counter(s.share for s in strategies.values() if s.experts)),
        "mean_score": float(np.mean([r.score for r in rollouts])),
        "mean_latency_s": float(np.mean([r.finished_at for r in rollouts])),
        "invalid_actions": int(sum(r.counters["invalid_actions"] for r in rollouts)),
    }
    return seqs, stats


def workflow_demonstrations(cfg: Config, policy: Policy, n_rollouts: int, seed: int) -> tuple[list[TrainSeq], dict]:
    """Equal shares of voting, eval_opt, orch_workers and a solo agent (the single control)."""
    from swarmrl.rl.trainer import make_runtime
    runtime, task = make_runtime(cfg, policy.tokenizer)
    rng = np.random.default_rng(seed)
    flows = [workflow_graph.preset(n, cfg.workflow.generators, cfg.workflow.workers)
             for n in ("voting", "eval_opt", "orch_workers")] + [None]
    problems = task.sample(rng, n_rollouts)
    rollouts = [runtime.new_rollout(i, i, p, NO_DEADLINE, 0, workflow=flows[i % len(flows)])
                for i, p in enumerate(problems)]
    solo = ScriptedActor(policy.tokenizer, policy.end_id,
                         {r.index: arith_scripts.Strategy(0, share="recompute") for r in rollouts if r.workflow is None})
    actor = workflow_scripts.WorkflowScriptedActor(policy.tokenizer, policy.end_id, seed=seed, fallback=solo)
    runtime.run(rollouts, actor, seed=seed)
    seqs = [TrainSeq(a.ids, a.gen_mask, a.logprobs, 0.0, a.role, r.index)
            for r in rollouts for a in r.agents.values() if any(a.gen_mask)]
    by_flow: dict[str, list[float]] = {}
    for r in rollouts:
        by_flow.setdefault(r.workflow.name if r.workflow else "single", []).append(r.score)
    stats = {
        "rollouts": n_rollouts, "sequences": len(seqs), "generated_tokens": sum(sum(s.gen_mask) for s in seqs),
        "team_sizes": {k: len(v) for k, v in by_flow.items()},  # rollouts per workflow
        "mean_score_by_workflow": {k: float(np.mean(v)) for k, v in by_flow.items()},
        "mean_score": float(np.mean([r.score for r in rollouts])),
        "mean_latency_s": float(np.mean([r.finished_at for r in rollouts])),
        "invalid_actions": int(sum(r.counters["invalid_actions"] for r in rollouts)),
    }
    return seqs, stats


def supervised(policy: Policy, seqs: list[TrainSeq], epochs: int, lr: float, batch_sequences: int,
               micro_batch_tokens: int, seed: int, log=print) -> list[float]:
    """Next-token cross-entropy on generated tokens only (token mean per batch)."""
    model = policy.model
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    rng = np.random.default_rng(seed)
    n_batches = epochs * math.ceil(len(seqs) / batch_sequences)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: min(1.0, (i + 1) / 20) * 0.5 * (1 + math.cos(math.pi * min(i / n_batches, 1.0))))
    losses, t0, b = [], time.perf_counter(), 0
    for epoch in range(epochs):
        order = rng.permutation(len(seqs))
        for start in range(0, len(seqs), batch_sequences):
            batch = [seqs[i] for i in order[start:start + batch_sequences]]
            num_tokens = sum(sum(s.gen_mask) for s in batch)
            opt.zero_grad(set_to_none=True)
            total = 0.0
            for micro in micro_batches(batch, micro_batch_tokens):
                t = pad(micro, policy.pad_id)
                logp, _ = token_logprobs(model, t["ids"], t["attn"], with_entropy=False)  # [B, T]
                loss = -(logp * t["mask"]).sum() / num_tokens
                loss.backward()
                total += float(loss.detach())
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(total)
            b += 1
            if b % 25 == 0 or b == n_batches:
                log(f"  warm start batch {b}/{n_batches} (epoch {epoch + 1}) loss {np.mean(losses[-25:]):.3f} "
                    f"[{time.perf_counter() - t0:.0f}s]")
    return losses


def check_warm_start(cfg: Config) -> None:
    """Refuse, before anything is built, a config the scripted demonstrations cannot serve."""
    if cfg.model.name_or_path:
        raise ConfigError("warm start builds the tiny default model; model.name_or_path is set, "
                          "so the model is used as is (it is the prior)")
    if cfg.task.name != "arith":
        # The scripted strategies write arithmetic items; math and code have no scripted solver.
        raise ConfigError(f"task.name={cfg.task.name}: the warm start has scripted demonstrations for "
                          "task.name=arith only; for math or code start from a model instead: "
                          "model.name_or_path=<Hugging Face model or dir>, or train --init <model dir>")


def warm_start(cfg: Config, log=print, force: bool = False) -> Path:
    """Return the directory of the warm-started policy, training it if not cached."""
    check_warm_start(cfg)
    out = Path(cfg.warmstart.cache_dir) / f"warmstart-{warmstart_key(cfg)}"
    if (out / "warmstart.json").exists() and not force:
        log(f"warm start: cached at {out}")
        return out
    t0 = time.perf_counter()
    torch.set_num_threads(cfg.run.threads)
    policy = build_tiny_policy(cfg.model, seed=cfg.warmstart.seed)
    # org: every team size 0..max_experts, plus a block of solo demos told `max=0` (see demonstrations).
    n = cfg.warmstart.demos_per_strategy * ((cfg.workflow.max_experts + 2) if demo_set(cfg) == "org" else 4)
    seqs, stats = demonstrations(cfg, policy, n, cfg.warmstart.seed)
    log(f"warm start ({demo_set(cfg)}): {stats['rollouts']} scripted rollouts, {stats['sequences']} agent "
        f"trajectories, {stats['generated_tokens']} target tokens; rollouts by team/workflow {stats['team_sizes']}")
    losses = supervised(policy, seqs, cfg.warmstart.epochs, cfg.warmstart.lr, cfg.warmstart.batch_sequences,
                        cfg.rl.micro_batch_tokens, cfg.warmstart.seed, log=log)
    tmp = out.with_name(out.name + ".tmp")
    save_policy(policy, tmp)
    stats.update({"final_loss": float(np.mean(losses[-10:])), "seconds": time.perf_counter() - t0,
                  "key": warmstart_key(cfg)})
    (tmp / "warmstart.json").write_text(json.dumps(stats, indent=2))
    if out.exists():
        import shutil
        shutil.rmtree(out)
    tmp.rename(out)  # the marker file travels with the directory: a half-written cache never counts
    log(f"warm start: done in {stats['seconds']:.0f}s, final loss {stats['final_loss']:.3f} -> {out}")
    return out


def load_warm_policy(path: Path, cfg: Config) -> Policy:
    return load_policy(path, cfg.model.dtype)
