"""The TRL side of benchmarks/vs_trl.py: TRL's GRPOTrainer on the same model, prompts and reward.

Run by vs_trl.py in TRL's own environment (`--side trl`); what is compared and how it is timed
is in vs_trl.py's docstring.
"""

from __future__ import annotations

import tempfile
import time
import warnings

from vs_trl import bench_config, digest, first_prompts, grade_completion, log, rank_world, versions


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


def step_callback(bench: dict, rows: list, warmup: int):
    """Step wall time = between successive on_step_end calls (the first one ends the warm-up)."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        last = None

        def on_step_end(self, targs, state, control, **kw):
            now = time.perf_counter()
            if state.global_step > warmup:
                wall = now - self.last
                rows.append({"step_s": wall, "update_s": wall - bench["generation_s"],
                             **{k: v for k, v in bench.items() if k not in ("prompt_ids", "prompts")}})
                log(f"trl step {state.global_step - 1}: {wall:.3f}s (generation {bench['generation_s']:.3f}s)")
            bench.setdefault("prompts", []).extend(bench["prompt_ids"][::targs.num_generations])
            self.last = now

    return StepTimer()


def run_trl(args) -> dict:
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
                      train_dataset=data, processing_class=tok, callbacks=[step_callback(bench, rows, args.warmup)])
        trainer.bench = bench
        trainer.train()
    return {"side": "trl", "steps": rows, "prompt_digest": digest(bench["prompts"]), "versions": versions(),
            "prompts_roundtrip": digest(bench["prompts"][:len(ids)]) == digest(ids)}
