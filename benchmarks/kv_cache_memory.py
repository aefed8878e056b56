"""Peak memory of one rollout step with the saved per-agent KV caches capped or not.

Continuous batching keeps each agent's keys/values between its turns (sampler.prefix_cache)
so that its next prompt runs only its new tokens. Without a cap those saved prefixes grow
with rollouts x agents x context; `sampler.kv_cache_mb` bounds them (policy/sampler.py
DecodeStream). Each setting runs in a fresh subprocess (so peak RSS, /proc VmHWM, is that
setting's own) on the demo config (configs/rlcr_arith.yaml) with a random-init tiny model:

  off      : kv_cache_mb = 0 (no cap)
  cap      : kv_cache_mb = --cap-mb, least recently saved prefixes dropped first
  cap+fin  : the same, and finished agents' prefixes dropped at once (`ActorStream.finished`,
             called between decode steps here as the runtime's event loop calls it)

The running batch's own cache (up to sampler max_batch_sequences rows, left padded to the
widest) is not under the cap; its peak is reported beside the saved prefixes' peak, and
with them the prefill's transient activations make up the rest of the peak RSS.

A random-init model never hires, so each rollout starts with `--experts` experts on the team
(the scaling eval's prestaffed team) to give the step the multi-agent cache load of a trained
policy; `--experts 0` is the bare CEO-only step. Sampled tokens do not depend on the setting
(tests/policy/test_stream.py), only memory and prefill compute do.

    .venv/bin/python benchmarks/kv_cache_memory.py [--rollouts 16 64 256] [--cap-mb 64] [--experts 4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

SETTINGS = ("off", "cap", "cap+fin")


def proc_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def child(rollouts: int, setting: str, cap_mb: float, experts: int, threads: int) -> dict:
    """One rollout step in this process; returns its measurements."""
    import numpy as np
    import torch

    from swarmrl.cli import DEMO_CONFIG, resolve_config
    from swarmrl.config import load_config
    from swarmrl.policy.actor import LLMActor
    from swarmrl.policy.model import build_tiny_policy
    from swarmrl.build import make_runtime, max_experts_for

    torch.set_num_threads(threads)
    cfg = load_config(resolve_config(DEMO_CONFIG), [f"sampler.kv_cache_mb={0 if setting == 'off' else cap_mb}"])
    policy = build_tiny_policy(cfg.model)
    runtime, task = make_runtime(cfg, policy.tokenizer)
    per = cfg.rl.rollouts_per_problem
    problems = task.sample(np.random.default_rng(cfg.seed), max(1, rollouts // per))
    rs = [runtime.new_rollout(g * per + j, g, p, cfg.time_limit.end, max_experts_for(cfg), prestaffed_experts=experts)
          for g, p in enumerate(problems) for j in range(per)][:rollouts]
    actor = LLMActor.from_config(cfg.sampler, policy)
    streams = []
    open_stream = actor.open_stream

    running = [0]  # the most bytes the running batch's own KV cache held (not capped)

    def recording_stream():
        s = open_stream()
        streams.append(s)
        ds, decode = s.stream, s.stream.step

        def measured_step():
            out = decode()
            if ds.cache is not None:
                running[0] = max(running[0], sum(getattr(layer, "_k", layer.keys).nbytes
                                                 + getattr(layer, "_v", layer.values).nbytes
                                                 for layer in ds.cache.layers))
            return out

        ds.step = measured_step
        if setting == "cap+fin":  # what the runtime's loop does once a rollout's wave is applied
            step, seen = s.step, []

            def step_then_forget():
                for r in seen:
                    s.finished(r)
                out = step()
                seen[:] = list({id(q.rollout): q.rollout for q, _ in out}.values())
                return out

            s.step = step_then_forget
        return s

    actor.open_stream = recording_stream
    rss_before = proc_kib("VmRSS")
    t0 = time.perf_counter()
    runtime.run(rs, actor, seed=cfg.seed)
    wall = time.perf_counter() - t0
    ds = streams[0].stream
    return {"rollouts": len(rs), "setting": setting, "cap_mb": 0 if setting == "off" else cap_mb,
            "agents": sum(len(r.agents) for r in rs), "turns": sum(len(r.turns) for r in rs),
            "generated_tokens": actor.generated_tokens, "wall_s": wall,
            "rss_before_mib": rss_before / 1024, "peak_rss_mib": proc_kib("VmHWM") / 1024,
            "peak_saved_kv_mib": ds.peak_cached_bytes / 2**20, "peak_running_kv_mib": running[0] / 2**20,
            "evicted": ds.evicted}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rollouts", type=int, nargs="+", default=[16, 64, 256])
    ap.add_argument("--cap-mb", type=float, default=64.0)
    ap.add_argument("--experts", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=str(Path(__file__).with_suffix(".json")))
    ap.add_argument("--child", nargs=2, metavar=("ROLLOUTS", "SETTING"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(int(args.child[0]), args.child[1], args.cap_mb, args.experts, args.threads)))
        return
    rows = []
    for n in args.rollouts:
        for setting in SETTINGS:
            cmd = [sys.executable, __file__, "--child", str(n), setting, "--cap-mb", str(args.cap_mb),
                   "--experts", str(args.experts), "--threads", str(args.threads)]
            run = subprocess.run(cmd, capture_output=True, text=True)
            if run.returncode != 0:
                sys.exit(f"{n} rollouts, {setting} failed:\n{run.stderr[-3000:]}")
            rows.append(json.loads(run.stdout.splitlines()[-1]))
            print(f"  {n} rollouts, {setting}: peak RSS {rows[-1]['peak_rss_mib']:.0f} MiB "
                  f"[{rows[-1]['wall_s']:.0f}s]", file=sys.stderr)
    table = ["| rollouts | agents | turns | setting | peak RSS MiB | RSS before MiB | saved KV peak MiB | "
             "running KV peak MiB | evicted | wall s |", "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        name = "off" if r["setting"] == "off" else f"{r['setting']} {r['cap_mb']:g} MiB"
        table.append(f"| {r['rollouts']} | {r['agents']} | {r['turns']} | {name} | {r['peak_rss_mib']:.0f} | "
                     f"{r['rss_before_mib']:.0f} | {r['peak_saved_kv_mib']:.1f} | {r['peak_running_kv_mib']:.1f} | "
                     f"{r['evicted']} | {r['wall_s']:.1f} |")
    print("\n".join(table))
    meta = {"experts": args.experts, "cap_mb": args.cap_mb, "threads": args.threads}
    Path(args.json).write_text(json.dumps({**meta, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
