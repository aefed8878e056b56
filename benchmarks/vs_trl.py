"""swarmrl's single agent vs TRL's GRPOTrainer: one RL step each, at equal work, side by side.

What is compared (issue 17, item 1). Both sides train the same model directory (by default the
demo's cached warm start, trained first if not cached: `workflow.name=single` warm-starts on the
org's demonstrations under the org's cache key; `--init DIR` or `--random` choose another), on
the same arith problems (step k's problems are `task.sample(rng_for("problems", seed, k),
problems_per_step)` on both sides), with the same completions per step (problems_per_step x
rollouts_per_problem = 4 x 8 = 32), learning rate
(`rl.lr`, 3e-4), clip range, grad-norm clip, sampling temperature, group-normalised advantages,
token-mean loss, no KL (`rl.kl_coef=0`, TRL `beta=0.0`), one optimizer step per batch (one epoch,
TRL `num_iterations=1`), plain AdamW, and the same number of torch threads.

  swarmrl : `workflow.name=single` (one agent, no hiring) through `swarmrl.rl.trainer.Trainer.step`:
            a multi-turn agent loop (the compact protocol: observation, reply, actions, next
            observation ...) under the simulated clock's deadline, graded by the arith task.
  TRL     : `GRPOTrainer` (plain `model.generate`, no vLLM). Its prompt is the single agent's
            first observation (the same token ids), and it writes ONE completion per prompt: the
            whole episode as one transcript. The turn-end token does not stop it (swarmrl's
            runtime would insert an observation there; TRL has no environment), so every
            completion has exactly the token budget: by default the mean number of tokens the
            swarmrl side generated per rollout in the first pair (`--trl-tokens auto`), which
            makes the generated tokens per step equal in expectation. The reward is swarmrl's:
            the completion's `<submit item="X">v</submit>` actions parsed by swarmrl's reply
            parser, graded by the arith task, first submission per item final (grading.settle),
            score = the mean over items. No deadline applies on the TRL side.

How it is timed. The parent process (in `.venv`) runs each side in its own subprocess: swarmrl in
`.venv`, TRL in `.venv-trl`; each side runs `--warmup` untimed steps then `--steps` timed ones
and prints one JSON line. Pairs are interleaved and alternate which side goes first (pair 0:
swarmrl first). Per step:
  swarmrl : step = wall time of `Trainer.step()`; generation = its `rollout_s` (rollouts, including
            the runtime's parsing and grading); update = step - generation (advantages, the
            learner, metrics); learner = the `Updater.update` call alone (timed by wrapping it).
  TRL     : step = wall time between successive `on_step_end` callbacks (batch fetch, generation,
            reward, loss, backward, clip, optimizer step); generation = `_generate_and_score_completions`
            (generate, decode, reward, advantages), timed in a `GRPOTrainer` subclass, which also
            times `_generate` alone; update = step - generation.
Processes. By default each side is one process with `--threads` threads. `--processes N` runs
each side data-parallel on N ranks under torch.distributed.run, each with threads // N threads:
swarmrl as `swarmrl train` runs it under `learner.processes` (the demo config's default on 2
cores; `learner.strategy=ddp`: each rank samples a contiguous share of the step's problems, the
rollouts are exchanged, each rank backpropagates a token-balanced share), TRL's GRPOTrainer under
accelerate's multi-CPU mode (each rank generates and trains 1/N of the step's completions;
gradients averaged). Rank 0 times the step; token counts and prompts are all ranks' together.
`--trl-processes M` gives TRL a different number (each side at its own default: `--processes 2
--trl-processes 1`). `--one-process` runs both sides in one process of TRL's environment (with
`--processes N`: both in each of N ranks, sharing one process group), steps alternating (TRL's warm-up, then each timed TRL step followed by one timed swarmrl step, off TRL's
clock; with `--trl-tokens auto` swarmrl's warm-up steps, run first, set TRL's length): the ratio
then does not carry the ~20% by which one process's speed differs from the next's on a shared VM.
Per pair: the ratio swarmrl / TRL of the median step time, of the median time per generated token,
and of each phase's median; the summary is the median over pairs (target: step ratio <= 0.5).

Reproduce (TRL lives in its own environment; torch is pinned FIRST so pip keeps the CPU wheel,
an unpinned torch pulls a multi-GB CUDA build):

    python3 -m venv .venv-trl
    .venv-trl/bin/pip install torch==2.13.0
    .venv-trl/bin/pip install trl transformers
    .venv/bin/python benchmarks/vs_trl.py --pairs 4 --warmup 2 --steps 5 --json benchmarks/vs_trl.json

Extra `key=value` arguments are swarmrl config overrides, applied to both sides. The committed
`benchmarks/vs_trl.json` says under `settings` how it was run (`threads`, `note`), and the load of
the machine before and after (`load_avg_1_5_15min`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRL_PYTHON = ROOT / ".venv-trl" / "bin" / "python"
CONFIG = "rlcr_arith"  # the demo config: its single-agent control is the measured case
# One agent, no KL, GRPO advantages, no diagnostic passes TRL does not make either.
# shaping.wrong_cost=0: TRL's reward (the same grader) has no cost for a wrong answer
BASE_OVERRIDES = ["workflow.name=single", "rl.smaller_caps_fraction=0", "rl.kl_coef=0", "rl.advantage=grpo", "rl.minibatches_per_step=1",
                  "rl.role_grad_interval=0", "eval.val_interval=0", "run.mfu=false", "shaping.wrong_cost=0",
                  "rl.demo_anchor_coef=0"]
TRL_SETUP = ("python3 -m venv .venv-trl\n"
             "  .venv-trl/bin/pip install torch==2.13.0   # pinned first: keeps the CPU wheel\n"
             "  .venv-trl/bin/pip install trl transformers")
DIFFERENCES = [
    "swarmrl: multi-turn agent loop (compact protocol; the runtime appends an observation after each "
    "turn-end token, parses actions, grades submissions); TRL: one completion per prompt, the whole "
    "episode as one transcript, the turn-end token does not stop generation",
    "prompt: identical token ids (the single agent's first observation); swarmrl's later observations "
    "(desk, grading outcomes) are prompt tokens in its trained sequences, which TRL does not have",
    "token budget: swarmrl max_new_tokens_per_turn per turn and the simulated-clock deadline per rollout "
    "(variable length); TRL a fixed max_completion_length per completion (see trl_tokens), always reached",
    "reward: the same parser, grader and first-submission-final rule; swarmrl counts only submissions "
    "landed before the deadline, TRL has no deadline",
    "swarmrl trains one sequence per rollout padded in length buckets (learner/pad_fraction); TRL pads "
    "prompts on the left to the longest prompt, completions are all the same length",
    "TRL computes no old log-probs (on-policy, num_iterations=1): ratio = exp(logp - logp.detach()); "
    "swarmrl uses the behaviour log-probs recorded while sampling",
    "both compute the per-token entropy in the loss forward (for logging); neither runs a reference model",
    "advantage: both (r - group mean) / group std; TRL adds 1e-4 to the std, swarmrl its own epsilon",
]


# ----------------------------------------------------------------------------- shared by both sides


def bench_config(overrides: list[str]):
    from swarmrl.config import load_config, resolve_config
    return load_config(resolve_config(CONFIG), BASE_OVERRIDES + list(overrides))


def rank_world() -> tuple[int, int]:
    """(rank, world size) under torch.distributed.run (`--processes`); (0, 1) in a plain process."""
    from swarmrl.distributed.torchrun import launch_world
    return launch_world()


def step_problems(cfg, task, step: int) -> list:
    """Step `step`'s problems, exactly as `Trainer.step_rollouts` draws them."""
    from swarmrl.seeds import rng_for
    return task.sample(rng_for("problems", cfg.seed, step), cfg.rl.problems_per_step)


def first_prompts(cfg, tokenizer, steps: int) -> tuple[list[list[int]], list]:
    """The single agent's first observation (token ids) for every problem of steps 0..steps-1, and the problems."""
    from swarmrl.build import make_runtime
    runtime, task = make_runtime(cfg, tokenizer)
    ids, problems = [], []
    for step in range(steps):
        for p in step_problems(cfg, task, step):
            r = runtime.new_rollout(len(problems), len(problems), p, cfg.time_limit.end)
            ids.append(list(runtime.next_turns(r)[0].prompt))
            problems.append(p)
    return ids, problems


def grade_completion(task, problem, text: str) -> float:
    """swarmrl's score of one transcript: its submit actions graded, first submission per item final."""
    from swarmrl.collective.actions import parse_reply
    from swarmrl.collective.grading import settle
    subs = []
    for act in parse_reply(text).actions:
        item = task.parse_item(problem, act.attrs.get("item", "")) if act.kind == "submit" else None
        if item is not None:
            g = task.grade(problem, item, act.body or "")
            subs.append({"t": 0.0, "agent": "ceo", "seq": len(subs), "item": item, "correct": g.correct,
                         "score": g.score, "status": g.status})
    won = [s["score"] for s in settle(subs).first.values() if s["correct"]]
    return sum(won) / problem.num_items


def digest(seqs: list[list[int]]) -> str:
    import hashlib
    return hashlib.sha256(json.dumps(seqs).encode()).hexdigest()[:16]


def versions() -> dict:
    import torch
    import transformers
    out = {"python": sys.version.split()[0], "torch": torch.__version__, "transformers": transformers.__version__}
    try:
        import trl
        out["trl"] = trl.__version__
    except ImportError:
        pass
    return out


# ----------------------------------------------------------------------------- the swarmrl side


# ----------------------------------------------------------------------------- the parent


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def check_trl_env(python: Path) -> dict:
    """TRL's interpreter and its versions; exits non-zero, saying how to create it, if it is not there."""
    probe = "import json, trl, transformers, torch, datasets; print(json.dumps({'trl': trl.__version__}))"
    why = f"{python} does not exist"
    if python.exists():
        res = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
        if res.returncode == 0:
            return json.loads(res.stdout.strip().splitlines()[-1])
        why = f"`import trl` fails in {python}: {(res.stderr.strip().splitlines() or ['?'])[-1]}"
    print(f"error: TRL's environment is missing ({why}).\nCreate it from the repository root:\n  {TRL_SETUP}\n"
          "or pass --trl-python PATH to an interpreter that has trl.", file=sys.stderr)
    sys.exit(2)


def model_dir(args, cfg) -> tuple[Path, str]:
    """The model both sides train, and how it was chosen."""
    if args.init:
        return Path(args.init), "given (--init)"
    if args.random:
        from swarmrl.api import random_model
        out = Path(tempfile.mkdtemp(prefix="vs_trl_random_"))
        return random_model(cfg, out, seed=cfg.seed), "random tiny model (--random)"
    from swarmrl.policy.warmstart import warm_start
    return warm_start(cfg, log=log), f"the warm start of {CONFIG} (cached under the swarmrl cache, trained if missing)"


def side_processes(args, side: str) -> int:
    """--processes, or for TRL --trl-processes where given."""
    return args.trl_processes if side == "trl" and args.trl_processes else args.processes


def run_side(side: str, python: Path, args, model: Path, trl_tokens: int | None) -> dict:
    """One side's run in its own interpreter; with --processes N > 1 on N ranks under
    torch.distributed.run, each with threads // N threads (rank 0 reports)."""
    n = side_processes(args, side)
    threads = max(1, args.threads // n)
    ranks = [] if n == 1 else ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}"]
    cmd = [str(python), *ranks, str(Path(__file__).resolve()), "--side", side, "--model", str(model),
           "--warmup", str(args.warmup), "--steps", str(args.steps), "--threads", str(threads)]
    cmd += ["--trl-tokens", str(trl_tokens)] if trl_tokens else []
    cmd += ["--swarmrl-sdpa", args.swarmrl_sdpa]
    env = {**os.environ, **{k: str(threads) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")},
           "PYTHONPATH": str(ROOT / "src"), "TOKENIZERS_PARALLELISM": "false"}
    res = subprocess.run(cmd + args.overrides, stdout=subprocess.PIPE, env=env, text=True, cwd=ROOT)
    if res.returncode != 0:
        sys.exit(f"error: the {side} side failed (exit {res.returncode}): {' '.join(cmd)}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def side_summary(run: dict) -> dict:
    """Medians of the step's phases (and of the side's own sub-phases), mean token counts."""
    steps = run["steps"]
    timed = [k for k in ("step_s", "generation_s", "update_s", "learner_s", "generate_s") if k in steps[0]]
    med = {k: statistics.median(s[k] for s in steps) for k in timed}
    counts = {k: statistics.mean(s[k] for s in steps) for k in ("generated_tokens", "trained_tokens", "padded_tokens",
                                                                 "reward_mean")}
    return {**med, **{k + ("_per_step" if k.endswith("tokens") else ""): v for k, v in counts.items()},
            "step_s_per_1k_generated_tokens": 1000 * med["step_s"] / counts["generated_tokens"]}


def pair_ratios(sw: dict, trl: dict) -> dict:
    a, b = side_summary(sw), side_summary(trl)
    return {"swarmrl": a, "trl": b, "ratio_step": a["step_s"] / b["step_s"],
            "ratio_per_generated_token": a["step_s_per_1k_generated_tokens"] / b["step_s_per_1k_generated_tokens"],
            "ratio_trained_tokens": a["trained_tokens_per_step"] / b["trained_tokens_per_step"],
            "ratio_generation": a["generation_s"] / b["generation_s"], "ratio_update": a["update_s"] / b["update_s"]}


def separate_runs(args, i: int, model: Path, trl_python: Path, trl_tokens: int | None):
    """Pair i as one process per side, alternating which goes first -> (order, runs, trl_tokens)."""
    order, runs = (["swarmrl", "trl"] if i % 2 == 0 else ["trl", "swarmrl"]), {}
    for side in order:
        if side == "trl" and trl_tokens is None:  # auto: pair 0 runs swarmrl first
            per_step = statistics.mean(s["generated_tokens"] for s in runs["swarmrl"]["steps"])
            trl_tokens = max(1, round(per_step / args.completions_per_step))
        log(f"pair {i}: {side}")
        runs[side] = run_side(side, Path(sys.executable) if side == "swarmrl" else trl_python, args, model,
                              trl_tokens if side == "trl" else None)
    return order, runs, trl_tokens


def run_pairs(args, model: Path, trl_python: Path) -> tuple[list[dict], int]:
    pairs, trl_tokens = [], None if args.trl_tokens == "auto" else int(args.trl_tokens)
    for i in range(args.pairs):
        if args.one_process:  # both sides in one process of TRL's environment, steps alternating
            log(f"pair {i}: both sides in one process")
            order, runs = ["both"], run_side("both", trl_python, args, model, trl_tokens)
            trl_tokens = runs.pop("trl_tokens")  # auto: pair 0's swarmrl warm-up sets it for every pair
        else:
            order, runs, trl_tokens = separate_runs(args, i, model, trl_python, trl_tokens)
        pairs.append({"order": order, **pair_ratios(runs["swarmrl"], runs["trl"]), "raw": runs})
        p = pairs[-1]
        log(f"pair {i}: swarmrl {p['swarmrl']['step_s']:.3f}s  trl {p['trl']['step_s']:.3f}s  "
            f"ratio {p['ratio_step']:.2f} (per generated token {p['ratio_per_generated_token']:.2f})")
    return pairs, trl_tokens


def summarize(pairs: list[dict]) -> dict:
    med = {k: statistics.median(p[k] for p in pairs)
           for k in ("ratio_step", "ratio_per_generated_token", "ratio_generation", "ratio_update")}
    sides = {s: {k: statistics.median(p[s][k] for p in pairs) for k in pairs[0][s]} for s in ("swarmrl", "trl")}
    return {"median_" + k: v for k, v in med.items()} | {"median_by_side": sides, "target_ratio_step": 0.5,
                                                        "target_met": med["ratio_step"] <= 0.5}


def warm_start_record(model: Path) -> dict:
    """What a warm-start directory was trained on (its warmstart.json: sequences, final loss,
    key), so that a result says which recipe it measured; {} for other model directories."""
    path = model / "warmstart.json"
    if not path.exists():
        return {}
    record = json.loads(path.read_text())
    return {k: record.get(k) for k in ("key", "rollouts", "sequences", "generated_tokens", "final_loss")}


def settings(args, cfg, how: str, model: Path, trl_tokens: int) -> dict:
    return {"config": CONFIG, "overrides": BASE_OVERRIDES + args.overrides, "model": str(model), "model_source": how,
            "model_warm_start": warm_start_record(model),
            "pairs": args.pairs, "warmup_steps": args.warmup, "timed_steps": args.steps, "threads": args.threads,
            "processes": {side: side_processes(args, side) for side in ("swarmrl", "trl")},
            "one_process": args.one_process, "swarmrl_sdpa": args.swarmrl_sdpa,
            "problems_per_step": cfg.rl.problems_per_step, "completions_per_problem": cfg.rl.rollouts_per_problem,
            "lr": cfg.rl.lr, "clip_eps": cfg.rl.clip_eps, "grad_clip": cfg.rl.grad_clip, "kl": 0.0,
            "temperature": cfg.sampler.temperature, "scale_rewards": cfg.rl.scale_rewards,
            "swarmrl_max_new_tokens_per_turn": cfg.sampler.max_new_tokens_per_turn,
            "swarmrl_deadline_s": [cfg.time_limit.start, cfg.time_limit.end], "trl_tokens": trl_tokens,
            "trl_tokens_rule": args.trl_tokens, "note": args.note,
            "trl": {"loss_type": "dapo", "beta": 0.0, "num_iterations": 1, "optim": "adamw_torch",
                    "generation": "transformers generate"}}


def check_processes(args, completions_per_step: int) -> None:
    """Every side's ranks split the step's completions evenly (TRL's per-device batch); exits non-zero otherwise."""
    for side in ("swarmrl", "trl"):
        n = side_processes(args, side)
        if n < 1 or completions_per_step % n:
            sys.exit(f"error: {side} on {n} processes: the {completions_per_step} completions of a step must "
                     "split evenly over at least one process (--processes / --trl-processes)")
    if args.one_process and side_processes(args, "swarmrl") != side_processes(args, "trl"):
        sys.exit("error: --one-process runs both sides in the same processes: give no --trl-processes")
    if args.one_process and args.trl_tokens == "auto" and args.warmup < 1:
        sys.exit("error: --one-process with --trl-tokens auto reads TRL's completion length off swarmrl's warm-up "
                 "steps: give --warmup 1 or more, or --trl-tokens N")


def parent(args) -> None:
    cfg = bench_config(args.overrides)
    args.completions_per_step = cfg.rl.problems_per_step * cfg.rl.rollouts_per_problem
    check_processes(args, args.completions_per_step)
    trl_python = Path(args.trl_python)
    trl_versions = check_trl_env(trl_python)  # before anything heavy: a missing environment costs nothing
    model, how = model_dir(args, cfg)
    log(f"model: {model} ({how}); TRL {trl_versions['trl']} in {trl_python}")
    t0, load_before = time.perf_counter(), os.getloadavg()
    pairs, trl_tokens = run_pairs(args, model, trl_python)
    digests = {p["raw"][s]["prompt_digest"] for p in pairs for s in ("swarmrl", "trl")}
    result = {"settings": settings(args, cfg, how, model, trl_tokens), "differences": DIFFERENCES,
              "versions": {s: pairs[0]["raw"][s]["versions"] for s in ("swarmrl", "trl")},
              "same_prompt_ids": len(digests) == 1, "wall_s": time.perf_counter() - t0, "cpus": os.cpu_count(),
              "load_avg_1_5_15min": {"before": load_before, "after": os.getloadavg()},  # other processes share the CPUs
              **summarize(pairs), "pairs": pairs}
    s = result
    steps = [p["ratio_step"] for p in pairs]
    print(f"median ratio swarmrl/TRL step time: {s['median_ratio_step']:.2f} (pairs {min(steps):.2f}-{max(steps):.2f}; "
          f"target <= 0.5); per generated token "
          f"{s['median_ratio_per_generated_token']:.2f}; generation {s['median_ratio_generation']:.2f}, update "
          f"{s['median_ratio_update']:.2f}; same prompts: {s['same_prompt_ids']}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps per run")
    ap.add_argument("--steps", type=int, default=5, help="timed steps per run")
    ap.add_argument("--threads", type=int, default=2, help="torch threads per side, shared by its processes")
    ap.add_argument("--processes", type=int, default=1,
                    help="processes per side (data parallel): swarmrl's ddp learner as `learner.processes` runs "
                         "it, TRL's GRPOTrainer under accelerate's multi-CPU mode; each gets threads // processes")
    ap.add_argument("--trl-processes", type=int, default=0, help="TRL's processes, where not --processes")
    ap.add_argument("--swarmrl-sdpa", choices=["default", "math"], default="default",
                    help="swarmrl's steps under torch's math SDPA kernel instead of the default choice (a probe; "
                         "not exact: it changes the rounding)")
    ap.add_argument("--one-process", action="store_true",
                    help="both sides in one process (TRL's environment), steps alternating: the machine's drift "
                         "hits both alike")
    ap.add_argument("--init", help="model directory for both sides (default: the cached warm start)")
    ap.add_argument("--random", action="store_true", help="a randomly initialised tiny model instead")
    ap.add_argument("--trl-python", default=str(DEFAULT_TRL_PYTHON), help="TRL's interpreter")
    ap.add_argument("--trl-tokens", default="auto",
                    help="TRL's max_completion_length; auto: swarmrl's mean generated tokens per rollout (pair 0)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--note", default="", help="free text stored with the settings (what else ran, ...)")
    ap.add_argument("--side", choices=["swarmrl", "trl", "both"], help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    args, args.overrides = ap.parse_known_args(argv)
    if args.side is None:
        return parent(args)
    args.trl_tokens = int(args.trl_tokens) if args.side != "swarmrl" and args.trl_tokens != "auto" else None
    if args.side in ("trl", "both"):
        from vs_trl_side import run_both, run_trl  # in TRL's environment (benchmarks/ is on sys.path)
        run = run_trl(args) if args.side == "trl" else run_both(args)
    else:
        from vs_trl_side import run_swarmrl
        run = run_swarmrl(args)
    if rank_world()[0] == 0:  # one JSON line per side, however many ranks ran it
        print(json.dumps(run))


if __name__ == "__main__":
    main()
