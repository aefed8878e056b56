"""Read what a team did: evaluation rollouts of a run (or a bare warm start) at one team size,
as plain text, every turn with its simulated times, observation and reply.

    .venv/bin/python benchmarks/eval_transcripts.py RUN --team-size 17 [--items 24] [--problems 1]
        [--horizon 8] [--greedy] [--config rlcr_arith] [--set workflow.span=8 ...] [--out FILE]

The rollouts are built as the scaling grid builds them (`scaling.scale.scale_rollouts`, as in
benchmarks/team_losses.py): the same held-out problems, in order. The grid runs every team size
in one batch, this script one; greedy decoding draws no random numbers, so its transcripts are the
grid's own up to float rounding (a nearly tied token can differ). Useful where a table says a
bigger team scores less and not why.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from swarmrl.config import load_config
from swarmrl.config_load import resolve_config
from swarmrl.report.samples import sample_row
from swarmrl.rl.loop import load_trained_policy
from swarmrl.runs.loggers import transcript
from swarmrl.scaling.scale import ScaleSpec, check_spec, scale_rollouts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a run directory, or a model directory with --config")
    ap.add_argument("--team-size", type=int, required=True, help="CEO included")
    ap.add_argument("--items", type=int, help="items per problem (task.items_per_problem)")
    ap.add_argument("--problems", type=int, default=1)
    ap.add_argument("--horizon", type=float, default=8.0, help="simulated seconds")
    ap.add_argument("--greedy", action="store_true")
    ap.add_argument("--config", help="the config for a bare model directory, e.g. rlcr_arith")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config override")
    ap.add_argument("--context", type=int, default=4096, help="model.max_context_tokens (as village_to_city.py)")
    ap.add_argument("--turns", type=int, default=24, help="sampler.max_turns_per_agent (as village_to_city.py)")
    ap.add_argument("--out", type=Path, help="write the transcripts here instead of standard output")
    args = ap.parse_args(argv)
    source = resolve_config(args.config) if args.config else args.run / "config.yaml"
    if not Path(source).is_file():
        raise SystemExit(f"{args.run} has no config.yaml: pass --config")
    overrides = [f"model.max_context_tokens={args.context}", f"sampler.max_turns_per_agent={args.turns}", *args.set]
    overrides += [f"task.items_per_problem={args.items}"] if args.items else []
    cfg = load_config(source, overrides)
    spec = check_spec(cfg, ScaleSpec([args.team_size], [args.horizon], args.problems, greedy=args.greedy))
    policy, _ = load_trained_policy(args.run)
    torch.set_num_threads(cfg.run.threads)
    team = scale_rollouts(cfg, policy, spec, log=lambda *a: None)[args.team_size]
    decode = lambda ids: policy.tokenizer.decode(ids, skip_special_tokens=False)  # noqa: E731
    text = "\n\n".join(transcript(sample_row(r, decode), max_chars=1 << 20) for r in team) + "\n"
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
