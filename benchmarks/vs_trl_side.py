"""The sides of benchmarks/vs_trl.py: swarmrl's single agent (`--side swarmrl`, in `.venv`), TRL's
GRPOTrainer on the same model, prompts and reward (`--side trl`, in TRL's own environment), and
both in one process of TRL's environment (`--side both`, `--one-process`). What is compared and
how it is timed is in vs_trl.py's docstring.
"""

from __future__ import annotations

import tempfile
import time
import warnings

from vs_trl import bench_config, digest, first_prompts, grade_completion, log, rank_world, versions


def sdpa_context(backend: str):
    """`--swarmrl-sdpa`: torch's own kernel choice, or its math kernel only."""
    import contextlib

    from torch.nn.attention import SDPBackend, sdpa_kernel
    return contextlib.nullcontext() if backend == "default" else sdpa_kernel(SDPBackend.MATH)


def swarmrl_side(args):
    """swarmrl's single agent as (step(i), finish()): step i is timed and kept from i = --warmup
    on; finish() closes the trainer and returns the side's result."""
    import torch
    from swarmrl.policy.model import load_policy
    from swarmrl.rl.trainer import Trainer
    torch.set_num_threads(args.threads)
    # On ranks: the data-parallel learner `swarmrl train` runs under learner.processes (each rank
    # samples a contiguous share of the step's problems, then all exchange the rollouts).
    ranked = [f"run.threads={args.threads}", "learner.strategy=ddp"] if rank_world()[1] > 1 else []
    cfg = bench_config(args.overrides + ranked)
    trainer = Trainer(cfg, load_policy(args.model, cfg.model.dtype))
    learner = {}
    update = trainer.updater.update

    def timed_update(seqs, *a, **kw):
        t0 = time.perf_counter()
        out = update(seqs, *a, **kw)
        learner.update(s=time.perf_counter() - t0, tokens=sum(len(s.ids) for s in seqs))
        return out

    trainer.updater.update = timed_update
    rows, prompts = [], []

    def step(i: int) -> float:
        """Runs step i; returns its mean generated tokens per rollout."""
        t0 = time.perf_counter()
        with sdpa_context(args.swarmrl_sdpa):
            m, rollouts = trainer.step()
        wall = time.perf_counter() - t0
        prompts.extend(list(r.agents["ceo"].ids[:r.turns[0].context_tokens])
                       for r in rollouts if r.index % cfg.rl.rollouts_per_problem == 0)
        gen = sum(t.generated_tokens for r in rollouts for t in r.turns)
        log(f"swarmrl step {i}: {wall:.3f}s (generation {m['rollout_s']:.3f}s), {gen} tokens")
        if i < args.warmup:
            return gen / len(rollouts)
        pad = m["learner/pad_fraction"]  # 1 - real / padded cells
        rows.append({"step_s": wall, "generation_s": m["rollout_s"], "update_s": wall - m["rollout_s"],
                     "learner_s": learner["s"], "generated_tokens": gen, "trained_tokens": learner["tokens"],
                     "padded_tokens": round(learner["tokens"] / (1.0 - pad)), "pad_fraction": pad,
                     "turns_per_rollout": m["turns_per_rollout"], "reward_mean": m["reward_mean"]})
        return gen / len(rollouts)

    def finish() -> dict:
        trainer.close()
        return {"side": "swarmrl", "steps": rows, "prompt_digest": digest(prompts), "versions": versions()}

    return step, finish


def run_swarmrl(args) -> dict:
    step, finish = swarmrl_side(args)
    for i in range(args.warmup + args.steps):
        step(i)
    return finish()


def trl_args(cfg, args, out_dir: str):
    """On N ranks (`--processes`) each generates and trains 1/N of the step's completions:
    accelerate's multi-CPU data parallelism, gradients averaged."""
    from trl import GRPOConfig
    per_step = cfg.rl.problems_per_step * cfg.rl.rollouts_per_problem
    return GRPOConfig(
        output_dir=out_dir, per_device_train_batch_size=per_step // rank_world()[1],
        num_generations=cfg.rl.rollouts_per_problem, gradient_accumulation_steps=1, num_iterations=1,
        max_steps=args.warmup + args.steps, learning_rate=cfg.rl.lr, lr_scheduler_type="constant", warmup_steps=0,
        weight_decay=cfg.rl.weight_decay, max_grad_norm=cfg.rl.grad_clip, optim="adamw_torch", beta=0.0,
        epsilon=cfg.rl.clip_eps, loss_type="dapo",  # dapo: a token mean over the batch, as rl.aggregation=token_mean
        scale_rewards=cfg.rl.scale_rewards, max_completion_length=args.trl_tokens,
        temperature=cfg.sampler.temperature, top_p=1.0, top_k=0, shuffle_dataset=False, use_cpu=True, bf16=False,
        seed=cfg.seed, logging_steps=10 ** 6, save_strategy="no", report_to="none", disable_tqdm=True,
        dataloader_num_workers=0, log_completions=False)


def timed_trainer_class():
    """GRPOTrainer with timers around generation (`_generate`) and rollout + scoring."""
    from accelerate.utils import gather_object
    from trl import GRPOTrainer

    class TimedGRPOTrainer(GRPOTrainer):
        bench: dict

        def _generate(self, prompts):
            t0 = time.perf_counter()
            out = super()._generate(prompts)
            self.bench["generate_s"] = time.perf_counter() - t0
            return out

        def _generate_and_score_completions(self, inputs):
            t0 = time.perf_counter()
            out = super()._generate_and_score_completions(inputs)
            self.bench["generation_s"] = time.perf_counter() - t0
            prompt, completion = out["prompt_mask"], out["completion_mask"]
            # This rank's share; on several ranks the step's counts and prompts are all ranks' together.
            mine = [(int(completion.sum()), int(prompt.sum() + completion.sum()), prompt.numel() + completion.numel(),
                     [ids[m.bool()].tolist() for ids, m in zip(out["prompt_ids"], prompt)])]
            shares = gather_object(mine) if rank_world()[1] > 1 else mine
            self.bench.update(generated_tokens=sum(x[0] for x in shares), trained_tokens=sum(x[1] for x in shares),
                              padded_tokens=sum(x[2] for x in shares), prompt_ids=[i for x in shares for i in x[3]],
                              reward_mean=self._metrics["train"]["reward"][-1])
            return out

    return TimedGRPOTrainer


def step_callback(bench: dict, rows: list, warmup: int, after=None):
    """Step wall time = between successive on_step_end calls (the first one ends the warm-up).
    `after(k)`, called after timed step k is recorded, runs outside TRL's clock (`--one-process`:
    the other side's step)."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        last = None

        def on_step_end(self, targs, state, control, **kw):
            now = time.perf_counter()
            timed = state.global_step > warmup
            if timed:
                wall = now - self.last
                rows.append({"step_s": wall, "update_s": wall - bench["generation_s"],
                             **{k: v for k, v in bench.items() if k not in ("prompt_ids", "prompts")}})
                log(f"trl step {state.global_step - 1}: {wall:.3f}s (generation {bench['generation_s']:.3f}s)")
            bench.setdefault("prompts", []).extend(bench["prompt_ids"][::targs.num_generations])
            if timed and after is not None:
                after(state.global_step - 1)
            self.last = time.perf_counter()

    return StepTimer()


def run_trl(args, after=None) -> dict:
    """TRL's side; `after(k)` runs after each timed step k, off TRL's clock (`step_callback`)."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    warnings.filterwarnings("ignore", category=FutureWarning)  # transformers' renames, inside TRL
    torch.set_num_threads(args.threads)
    cfg = bench_config(args.overrides)
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    ids, problems = first_prompts(cfg, tok, args.warmup + args.steps)
    # One transcript per prompt: the turn-end token (the tokenizer's eos) must not stop generation,
    # so eos becomes the pad token (never sampled) and every completion is max_completion_length long.
    tok.eos_token = tok.pad_token
    model.generation_config.eos_token_id = tok.pad_token_id
    from swarmrl.build import task_from_config
    task = task_from_config(cfg)

    def swarmrl_arith_score(completions, pid, **kw):
        return [grade_completion(task, problems[i], text) for text, i in zip(completions, pid)]

    data = Dataset.from_list([{"prompt": tok.decode(p), "pid": i} for i, p in enumerate(ids)])
    bench, rows = {}, []
    with tempfile.TemporaryDirectory() as out_dir:
        cls = timed_trainer_class()
        trainer = cls(model=model, reward_funcs=[swarmrl_arith_score], args=trl_args(cfg, args, out_dir),
                      train_dataset=data, processing_class=tok, callbacks=[step_callback(bench, rows, args.warmup, after)])
        trainer.bench = bench
        trainer.train()
    return {"side": "trl", "steps": rows, "prompt_digest": digest(bench["prompts"]), "versions": versions(),
            "prompts_roundtrip": digest(bench["prompts"][:len(ids)]) == digest(ids)}


def run_both(args) -> dict:
    """`--one-process`: both sides in this process, their steps alternating. swarmrl's warm-up
    steps run first (with `--trl-tokens auto` they set TRL's completion length: their mean
    generated tokens per rollout), then TRL's; then each timed TRL step is followed by one timed
    swarmrl step, which TRL's clock leaves out. Whatever the machine's speed does during the run,
    it does to both sides alike."""
    sw_step, sw_finish = swarmrl_side(args)
    per_rollout = [sw_step(i) for i in range(args.warmup)]
    if args.trl_tokens is None:
        args.trl_tokens = max(1, round(sum(per_rollout) / len(per_rollout)))
    trl = run_trl(args, after=sw_step)
    return {"swarmrl": sw_finish(), "trl": trl, "trl_tokens": args.trl_tokens}
