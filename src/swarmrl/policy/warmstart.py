"""Warm start: supervised training on scripted demonstrations of *every* strategy.

A tiny model from scratch can only explore what its warm start makes likely. The
demonstrations therefore cover all team sizes 0..max_experts and every coordination
style in comparable amounts (tasks/arith_scripts.py), so the warm-started policy is a
broad prior, as a base model would be, and RL selects within it. Demonstrations run
through the real runtime with no deadline, so their contexts are token-for-token what
the policy will see during RL.

The scenario decides which rollouts are demonstrated (scenarios/: `demonstrations`), the task
plays them (`Task.scripts()`); a task without scripts starts from a model instead.

The result is cached under `warmstart.cache_dir` (default: the user's cache directory,
paths.py), keyed by a content hash of everything that determines it (config sections and the
source of the code that produces the data).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch

from swarmrl.build import check_plugins, make_runtime
from swarmrl.collective import handlers as handlers_module, protocol as protocol_module
from swarmrl.collective import runtime as runtime_module, tools as tools_module
from swarmrl.config import Config, ConfigError
from swarmrl.distributed.launch import (WARMSTART, callers_key, check_callers_key, launch, launch_needed,
                                        warm_start_threads)
from swarmrl.distributed.sharding import ShardedLearner, flat_grads
from swarmrl.distributed.torchrun import is_writer, launch_world
from swarmrl.paths import cache_dir
from swarmrl.runs.environment import environment, trained_elsewhere
from swarmrl.runs.manifest import move_into_place, remove_stale_temps
from swarmrl.policy import chat as chat_module
from swarmrl.policy import model as model_module
from swarmrl.policy import tokenizer as tokenizer_module
from swarmrl.policy.model import Policy, build_tiny_policy, save_policy
from swarmrl.rl.batch import micro_batches, pad, token_logprobs, TrainSeq
from swarmrl.scenarios import base as scenario_base, graph as scenario_graph, org as scenario_org
from swarmrl.scenarios import make_scenario
from swarmrl.seeds import rng_for
from swarmrl.tasks import TASKS, arith, arith_items, arith_roles, arith_scripts
from swarmrl.workflows import graph as workflow_graph

# The code that produces the demonstrations: its source is part of the cache key.
_DEMO_CODE = (arith, arith_items, arith_scripts, arith_roles, runtime_module, handlers_module, protocol_module,
              tools_module, chat_module, tokenizer_module, model_module, workflow_graph, scenario_base, scenario_org,
              scenario_graph)


_LEARNER_ONLY = ("device", "mixed_precision", "gradient_checkpointing")
_SAMPLER_COMPUTE_ONLY = ("share_prompts", "batched_adapters", "draft_tokens")


def _plugin_code(*classes: type) -> list[str]:
    """The source of the modules defining these classes where they are not among _DEMO_CODE
    (a `module:Name` task or scenario), and of the helpers they loaded: editing a plugin's scripts
    makes a new warm start. Helpers are the loaded modules of the plugin's top-level package, or,
    for a plugin file or top-level module, the loaded modules beside it (conservative: an edit to
    any of them retrains)."""
    mods = {}
    for cls in classes:
        home = sys.modules[cls.__module__]
        if home in _DEMO_CODE:
            continue
        mods[home.__name__] = home
        if not home.__name__.startswith("swarmrl."):  # swarmrl's own tasks: their module is enough
            mods |= {m.__name__: m for m in _helpers(home)}
    return [_source(mods[name]) for name in sorted(mods)]


def _source(module) -> str:
    try:
        return inspect.getsource(module)
    except OSError:  # an empty file (a package's bare __init__.py) has no lines to return
        return ""


def _helpers(home) -> list:
    """Loaded Python-source modules of `home`'s top-level package, or (no package) beside its file,
    unless that directory is an installed library's (site-packages)."""
    top, file = home.__name__.partition(".")[0], getattr(home, "__file__", None)
    here = Path(file).resolve().parent if file else None
    if "." not in home.__name__ and (here is None or here.name in ("site-packages", "dist-packages")):
        return []
    packaged, found = "." in home.__name__, []
    for name, mod in list(sys.modules.items()):
        path = getattr(mod, "__file__", None)
        if mod is None or mod is home or not path or not path.endswith(".py") or mod in _DEMO_CODE:
            continue
        if name == "__main__":  # the script that started this process, which another process is not
            continue
        if (name == top or name.startswith(top + ".")) if packaged else Path(path).resolve().parent == here:
            found.append(mod)
    return found


def warmstart_key(cfg: Config) -> str:
    scenario = make_scenario(cfg)
    parts = {
        # the warm start trains the tiny model in float32 on the CPU: where and how the RL learner
        # runs it later changes no weight of it
        "model": {k: v for k, v in cfg.model.__dict__.items() if k not in _LEARNER_ONLY},
        "task": cfg.task.__dict__, "clock": cfg.clock.__dict__,
        "demo_set": scenario.demo_set, **scenario.demo_key(),
        **({"groups": cfg.workflow.groups} if cfg.workflow.groups != 1 else {}),  # groups see variants in demos too
        # ranks compute what one process computes (ranked_backward), at threads that set the rounding
        "warmstart": {k: v for k, v in cfg.warmstart.__dict__.items() if k not in ("cache_dir", "processes", "threads")},
        "warmstart_threads": warm_start_threads(cfg),
        # these change only how the sampler computes, never a demonstration
        "sampler": {k: v for k, v in cfg.sampler.__dict__.items() if k not in _SAMPLER_COMPUTE_ONLY},
        # the micro-batches' split sets the order in which their gradients add up: the weights' last bits
        "micro_batches": [cfg.rl.micro_batch_tokens, cfg.rl.max_pad_fraction],
        "code": [inspect.getsource(m) for m in _DEMO_CODE]
        + [inspect.getsource(f) for f in (demonstrations, epoch_batches, lr_factor, learned, supervised,
                                          train_batch, micro_loss)]
        + _plugin_code(TASKS.get(cfg.task.name), type(scenario)),
        "version": 3,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def demonstrations(cfg: Config, policy: Policy, n_rollouts: int, seed: int) -> tuple[list[TrainSeq], dict]:
    """The scenario's scripted rollouts (its `demonstrations`, played by the task's scripts),
    run through the real runtime with no deadline; one training sequence per agent."""
    runtime, task = make_runtime(cfg, policy.tokenizer)
    scenario = runtime.scenario
    scripts = task.scripts()
    if scripts is None:
        raise ConfigError(f"task {cfg.task.name!r} has no scripted demonstrations")
    rollouts, actor, stats = scenario.demonstrations(runtime, scripts, policy.tokenizer, policy.end_id, n_rollouts, seed)
    runtime.run(rollouts, actor, seed=seed)
    seqs = [TrainSeq(a.ids, a.gen_mask, a.logprobs, 0.0, a.role, r.index)
            for r in rollouts for a in r.agents.values() if any(a.gen_mask)]
    # latency over the rollouts that solved every item: one cut short ends at NO_DEADLINE
    solved = [r.finished_at for r in rollouts if r.end_reason == "solved"]
    by_scenario: dict[str, list[float]] = {}
    for r in rollouts:
        by_scenario.setdefault(r.scenario.name, []).append(r.score)
    return seqs, {
        "rollouts": n_rollouts, "sequences": len(seqs), "generated_tokens": sum(sum(s.gen_mask) for s in seqs),
        **stats,
        "mean_score_by_scenario": {k: float(np.mean(v)) for k, v in by_scenario.items()},
        "mean_score": float(np.mean([r.score for r in rollouts])),
        "mean_latency_s": float(np.mean(solved)) if solved else None,
        "unsolved_rollouts": n_rollouts - len(solved),
        "invalid_actions": int(sum(r.counters["invalid_actions"] for r in rollouts)),
    }


def epoch_batches(lengths: list[int], batch_sequences: int, group_batches: int,
                  rng: np.random.Generator) -> list[list[int]]:
    """One pass's batches, as indices into `lengths` (a sequence's token count). Random batches
    when `group_batches` is 0; else (warmstart.length_group_batches) the shuffled order is cut
    into runs of `group_batches` batches, each run sorted by length and split into batches, and
    the batches shuffled, so a batch holds similar lengths while the pass stays random."""
    order = rng.permutation(len(lengths))
    if group_batches == 0:
        return [list(order[i:i + batch_sequences]) for i in range(0, len(order), batch_sequences)]
    run = group_batches * batch_sequences
    batches = []
    for start in range(0, len(order), run):
        part = sorted(order[start:start + run], key=lambda i: lengths[i])  # stable: ties keep the shuffle
        batches += [part[i:i + batch_sequences] for i in range(0, len(part), batch_sequences)]
    return [batches[i] for i in rng.permutation(len(batches))]


def lr_factor(i: int, n_batches: int, per_pass: int) -> float:
    """The learning rate's multiple at batch i: a warm-up over 20 batches, then one cosine to 0 over
    the n_batches of the scheduled passes; in a pass added past them (`supervised`'s
    `extra_epochs`), the same warm-up and a cosine over that pass alone."""
    if i < n_batches:
        return min(1.0, (i + 1) / 20) * 0.5 * (1 + math.cos(math.pi * min(i / n_batches, 1.0)))
    k = (i - n_batches) % per_pass
    return min(1.0, (k + 1) / 20) * 0.5 * (1 + math.cos(math.pi * k / per_pass))


def learned(losses: list[float], learned_loss: float) -> bool:
    """The warm start counts as learned: no threshold (0), or the mean loss of its last 10
    batches (what warmstart.json records as `final_loss`) at or below `learned_loss`."""
    return learned_loss <= 0 or (bool(losses) and float(np.mean(losses[-10:])) <= learned_loss)


def supervised(policy: Policy, seqs: list[TrainSeq], epochs: int, lr: float, batch_sequences: int,
               micro_batch_tokens: int, seed: int, log=print, max_pad: float = 1.0,
               learner: ShardedLearner | None = None, group_batches: int = 0,
               learned_loss: float = 0.0, extra_epochs: int = 0) -> list[float]:
    """Next-token cross-entropy on generated tokens only (token mean per batch). `max_pad`: as in
    the RL update (rl.max_pad_fraction), a micro-batch closes before it is more than this share
    padding (a solo CEO's trajectory is several times an expert's). `learner`: several ranks
    (warmstart.processes) share each batch's micro-batches (`ranked_backward`), and every rank
    takes the optimizer step one process would. `group_batches`: batches of similar lengths
    (`epoch_batches`). While the `epochs` passes end above `learned_loss` (`learned`), up to
    `extra_epochs` more passes run, one at a time (`lr_factor`); every rank sees the same losses,
    so the ranks decide alike."""
    model = policy.model
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    rng = rng_for("warmstart_order", seed)
    per_pass = math.ceil(len(seqs) / batch_sequences)
    n_batches = epochs * per_pass
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: lr_factor(i, n_batches, per_pass))
    losses, t0 = [], time.perf_counter()
    lengths = [len(s.ids) for s in seqs]
    epoch = 0
    while epoch < epochs or (epoch < epochs + extra_epochs and not learned(losses, learned_loss)):
        if epoch >= epochs:
            log(f"  warm start: loss {np.mean(losses[-10:]):.3f} after {epoch} passes, above "
                f"warmstart.learned_loss={learned_loss}: one more pass ({epoch - epochs + 1} of at most {extra_epochs})")
        planned = max(n_batches, (epoch + 1) * per_pass)
        for indices in epoch_batches(lengths, batch_sequences, group_batches, rng):
            batch = [seqs[i] for i in indices]
            losses.append(train_batch(model, opt, batch, policy.pad_id, micro_batch_tokens, max_pad, learner))
            sched.step()
            b = len(losses)
            if b % 25 == 0 or b == planned:
                log(f"  warm start batch {b}/{planned} (epoch {epoch + 1}) loss {np.mean(losses[-25:]):.3f} "
                    f"[{time.perf_counter() - t0:.0f}s]")
        epoch += 1
    return losses


def train_batch(model: torch.nn.Module, opt: torch.optim.Optimizer, batch: list[TrainSeq], pad_id: int,
                micro_batch_tokens: int, max_pad: float, learner: ShardedLearner | None) -> float:
    """One optimizer step on the batch's token-mean loss, accumulated micro-batch by micro-batch
    (or over the ranks, `ranked_backward`); returns that loss."""
    num_tokens = sum(sum(s.gen_mask) for s in batch)
    micros = micro_batches(batch, micro_batch_tokens, max_pad=max_pad)
    opt.zero_grad(set_to_none=True)
    if learner is None:
        total = 0.0
        for micro in micros:
            loss = micro_loss(model, micro, pad_id, num_tokens)
            loss.backward()  # .grad accumulates micro-batch by micro-batch
            total += float(loss.detach())
    else:
        total = ranked_backward(model, micros, pad_id, num_tokens, learner)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return total


def micro_loss(model: torch.nn.Module, micro: list[TrainSeq], pad_id: int, num_tokens: int) -> torch.Tensor:
    """The micro-batch's share of the batch's token-mean cross-entropy on generated tokens."""
    t = pad(micro, pad_id)
    logp, _ = token_logprobs(model, t["ids"], t["attn"], with_entropy=False)  # [B, T]
    return -(logp * t["mask"]).sum() / num_tokens


def micro_owners(micros: list[list[TrainSeq]], world: int) -> list[int]:
    """The rank that backpropagates each micro-batch: largest first (padded cells) to the least
    loaded rank, so the ranks finish together. Any assignment gives the same gradient, because
    `ranked_backward` adds the micro-batches' gradients in their own order."""
    cells = [len(m) * max(len(s.ids) for s in m) for m in micros]
    load, owner = [0] * world, [0] * len(micros)
    for i in sorted(range(len(micros)), key=lambda i: -cells[i]):  # stable: ties in micro-batch order
        owner[i] = min(range(world), key=lambda r: load[r])
        load[owner[i]] += cells[i]
    return owner


def ranked_backward(model: torch.nn.Module, micros: list[list[TrainSeq]], pad_id: int, num_tokens: int,
                    learner: ShardedLearner) -> float:
    """This rank backpropagates its micro-batches (`micro_owners`) one at a time; the ranks then
    exchange every micro-batch's gradient, and each rank adds them in micro-batch order, the order
    in which one process's .grad accumulates them. So the ranks compute what one process computes,
    operation for operation, so with the same threads (the cache key's `warmstart_threads`) the
    weights are the same bits. Every parameter of the tiny model takes part in every forward (a
    gradient that is None counts as zeros). Returns the batch's loss, added in the same order."""
    params = list(model.parameters())
    size = sum(p.numel() for p in params) + 1  # the flat gradient, then the loss
    owner = micro_owners(micros, learner.world)
    rows = []
    for i, micro in enumerate(micros):
        if owner[i] != learner.rank:
            continue
        t0 = time.perf_counter()
        model.zero_grad(set_to_none=True)
        loss = micro_loss(model, micro, pad_id, num_tokens)
        loss.backward()
        rows.append(torch.cat([*flat_grads(params), loss.detach().reshape(1)]))  # [size]
        learner.busy_s += time.perf_counter() - t0
    learner.waits()
    items = learner.gather_ordered(rows, owner, size)  # every micro-batch's row, in micro-batch order
    grad = items[0][:-1].clone()  # [size - 1]
    for item in items[1:]:
        grad += item[:-1]
    offset = 0
    for p in params:
        p.grad = grad[offset:offset + p.numel()].view_as(p).clone()
        offset += p.numel()
    total = 0.0
    for item in items:
        total += float(item[-1])
    return total


def check_warm_start(cfg: Config) -> None:
    """Refuse, before anything is built, a config the scripted demonstrations cannot serve."""
    if cfg.model.name_or_path:
        raise ConfigError("warm start builds the tiny default model; model.name_or_path is set, "
                          "so the model is used as is (it is the prior)")
    check_plugins(cfg)  # every registry name resolves before minutes of demonstrations
    task_cls, scenario = TASKS.get(cfg.task.name), make_scenario(cfg)
    if not scenario.demo_set:
        raise ConfigError(f"workflow.name={cfg.workflow.name}: the scenario has no scripted demonstrations; "
                          "start from a model instead: model.name_or_path=<Hugging Face model or dir>, "
                          "or train --init <model dir>")
    if not getattr(task_cls, "scripted", False):
        raise ConfigError(f"task.name={cfg.task.name}: the task has no scripted demonstrations for the warm "
                          "start; start from a model instead: model.name_or_path=<Hugging Face model or dir>, "
                          "or train --init <model dir>")


def warm_start(cfg: Config, log=print, force: bool = False, keep_group: bool = False) -> Path:
    """The warm-started policy's directory, trained if not cached. `keep_group`: leave torchrun's
    process group open for the training that follows (one destroyed and opened again hangs)."""
    check_warm_start(cfg)
    check_callers_key(key := warmstart_key(cfg))
    out = cache_dir(cfg.warmstart.cache_dir) / f"warmstart-{key}"  # ConfigError if unwritable
    if (out / "warmstart.json").exists() and not force:
        meta = json.loads((out / "warmstart.json").read_text())
        warn = "" if meta.get("learned", True) else (f" (warning: it ended at loss {meta['final_loss']:.3f}, above "
                                                     "warmstart.learned_loss: likely unlearned)")
        log(f"warm start: cached at {out}{warn}{trained_elsewhere(meta.get('environment'))}")
        return out
    if launch_needed(cfg, WARMSTART):  # warmstart.processes ranks train it (distributed/launch.py)
        launch(cfg, ["pretrain", *(["--force"] if force else [])], log, WARMSTART, callers_key(key))
        if not (out / "warmstart.json").exists():
            raise RuntimeError(f"the warm start's ranks finished without writing {out}")
        return out
    learner = _open_ranks(cfg)
    try:
        _train_warm_start(cfg, out, learner, log if is_writer() else (lambda *a, **k: None), force)
    finally:
        if learner is not None:  # a barrier first: no rank returns before rank 0 has written `out`
            learner.barrier() if keep_group else learner.close()
    return out


def _open_ranks(cfg: Config) -> ShardedLearner | None:
    """The process group when torchrun started several ranks (None in one process); they must be
    the warmstart.processes asked for."""
    rank, world = launch_world()
    if world == 1:
        return None
    if cfg.warmstart.processes != world:
        raise ConfigError(f"the warm start runs on {world} ranks but warmstart.processes={cfg.warmstart.processes}: "
                          f"set warmstart.processes={world}, or run it in one process")
    return ShardedLearner("ddp", "gloo", rank, world)  # the tiny model trains on the CPU, on any machine


def _train_warm_start(cfg: Config, out: Path, learner: ShardedLearner | None, log, force: bool = False) -> None:
    """Demonstrations, supervised training, and (rank 0) the cache directory `out`."""
    t0 = time.perf_counter()
    torch.set_num_threads(warm_start_threads(cfg))  # the cache key's: the threads set the rounding
    policy = build_tiny_policy(cfg.model, seed=cfg.warmstart.seed)
    scenario = make_scenario(cfg)
    n = scenario.demo_count(cfg.warmstart.demos_per_strategy)
    seqs, stats = demonstrations(cfg, policy, n, cfg.warmstart.seed)
    log(f"warm start ({scenario.demo_set}): {stats['rollouts']} scripted rollouts, {stats['sequences']} agent "
        f"trajectories, {stats['generated_tokens']} target tokens; rollouts by team/workflow {stats['team_sizes']}")
    losses = supervised(policy, seqs, cfg.warmstart.epochs, cfg.warmstart.lr, cfg.warmstart.batch_sequences,
                        cfg.rl.micro_batch_tokens, cfg.warmstart.seed, log=log, max_pad=cfg.rl.max_pad_fraction,
                        learner=learner, group_batches=cfg.warmstart.length_group_batches,
                        learned_loss=cfg.warmstart.learned_loss, extra_epochs=cfg.warmstart.extra_epochs)
    passes = len(losses) / math.ceil(len(seqs) / cfg.warmstart.batch_sequences)
    if not learned(losses, cfg.warmstart.learned_loss):
        log(f"warning: the warm start ended at loss {np.mean(losses[-10:]):.3f} after {passes:.0f} passes, above "
            f"warmstart.learned_loss={cfg.warmstart.learned_loss}: it has likely not learned the task, and RL "
            "from it starts from a weak prior. Try another warmstart.seed, or more warmstart.epochs")
    idle = learner.busy_metrics("warmstart") if learner is not None else {}  # a collective: every rank
    if not is_writer():
        return
    remove_stale_temps(out.parent, prefix=f".{out.name}.")  # what a killed attempt left
    tmp = out.parent / f".{out.name}.tmp_{os.getpid()}"  # one per process: two runs may warm-start at once
    save_policy(policy, tmp)
    world = learner.world if learner is not None else 1
    stats.update({"final_loss": float(np.mean(losses[-10:])), "passes": passes,
                  "learned": learned(losses, cfg.warmstart.learned_loss), "seconds": time.perf_counter() - t0,
                  "key": out.name.removeprefix("warmstart-"), "processes": world, **idle,  # named at the start
                  "environment": environment(threads=warm_start_threads(cfg), processes=world)})  # who trained it
    (tmp / "warmstart.json").write_text(json.dumps(stats, indent=2))
    if (out / "warmstart.json").exists() and not force:  # another process finished the same inputs first:
        shutil.rmtree(tmp)  # keep its copy, which a run may be loading
        log(f"warm start: another process cached it first, at {out}")
        return
    move_into_place(tmp, out)  # the marker file travels with the directory: a half-written cache never counts
    log(f"warm start: done in {stats['seconds']:.0f}s, final loss {stats['final_loss']:.3f} -> {out}")
