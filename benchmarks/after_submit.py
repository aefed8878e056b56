"""What a policy writes right after a submission: the next-token probabilities after every
generated `</submit>` in evaluation rollouts, by team size, under the run's policy and its warm start.

A solo agent's turn should end there (the warm start puts 99.9% on the end token); a team's
experts go on to post the result. Probability on a digit or another `<submit` is a guess being
appended: under a deadline an item the agent will not reach is free to guess unless a wrong
answer costs something (`shaping.wrong_cost`).

    .venv/bin/python benchmarks/after_submit.py RUN --warm-start DIR [--team-sizes 1,9]
        [--problems 16] [--horizon 20] [--json F]

The rollouts are the scaling grid's (`scaling.scale.scale_rollouts`, sampled at T=1), drawn once
with each policy; both policies score the contexts of both.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from swarmrl.config import load_config
from swarmrl.policy.model import load_policy
from swarmrl.rl.loop import load_trained_policy
from swarmrl.scaling.scale import ScaleSpec, check_spec, scale_rollouts

KINDS = {"post": '<post ch="', "submit": '<submit item="', "done": "<done/>"}


def token_ids(policy) -> tuple[int, dict[str, list[int]]]:
    """(the id of `</submit>`, each kind's ids: the turn's end, the tags in KINDS, `digit` 0-9)."""
    one = policy.tokenizer.convert_tokens_to_ids
    ids = {"end": [policy.end_id], **{k: [one(v)] for k, v in KINDS.items()}}
    ids["digit"] = [one(str(d)) for d in range(10)]
    return one("</submit>"), ids


@torch.no_grad()
def after_submit(rollouts, models: dict, close: int, kinds: dict[str, list[int]]) -> dict:
    """Mean probability of each kind right after a generated `</submit>`, under each model."""
    sums = {m: dict.fromkeys(kinds, 0.0) for m in models}
    n = 0
    for r in rollouts:
        for a in r.agents.values():
            at = [i for i in range(len(a.ids) - 1) if a.ids[i] == close and a.gen_mask[i]]
            if not at:
                continue
            n += len(at)
            for m, model in models.items():
                probs = torch.softmax(model(input_ids=torch.tensor([a.ids])).logits[0, at].float(), -1)  # [S, V]
                for k, ids in kinds.items():
                    sums[m][k] += float(probs[:, ids].sum())
    return {"submissions": n, **{m: {k: v / max(n, 1) for k, v in s.items()} for m, s in sums.items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--warm-start", type=Path, required=True)
    ap.add_argument("--team-sizes", default="1,9")
    ap.add_argument("--problems", type=int, default=16)
    ap.add_argument("--horizon", type=float, default=20.0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    cfg = load_config(args.run / "config.yaml", ["sampler.max_turns_per_agent=24"])  # as `scale`: never binds
    torch.set_num_threads(cfg.run.threads)
    policies = {"trained": load_trained_policy(args.run)[0], "warm_start": load_policy(args.warm_start)}
    models = {m: p.model for m, p in policies.items()}
    close, kinds = token_ids(policies["trained"])
    sizes = [int(k) for k in args.team_sizes.split(",")]
    spec = check_spec(cfg, ScaleSpec(sizes, [args.horizon], args.problems, greedy=False))
    out = {"run": str(args.run), "warm_start": str(args.warm_start), "problems": args.problems,
           "horizon_s": args.horizon, "rollouts_of": {}}
    for who, pol in policies.items():
        teams = scale_rollouts(cfg, pol, spec, log=lambda *a: None)
        out["rollouts_of"][who] = {k: after_submit(rs, models, close, kinds) for k, rs in teams.items()}
        for k, res in out["rollouts_of"][who].items():
            print(f"{who}'s rollouts, team {k}: {res['submissions']} submissions; after </submit>, "
                  + "; ".join(f"{m}: " + ", ".join(f"{kind} {p:.4f}" for kind, p in res[m].items()) for m in models))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
