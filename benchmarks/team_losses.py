"""Where a trained team's lost items go: the team of a run, on the scaling grid's held-out
problems, up to a horizon; every item it does not solve, by cause.

    .venv/bin/python benchmarks/team_losses.py RUN [--greedy] [--team-size 9] [--problems 48] [--horizon 20] [--json OUT]
    .venv/bin/python benchmarks/team_losses.py WARMSTART --config RUN/config.yaml ...   # its warm start

It runs team sizes 1, 2, 4, 8 and the team size through `scaling.scale.scale_rollouts`, the
batch `swarmrl scale RUN --team-sizes 1,2,4,8,9` reads its grid from, so the rollouts are the
grid's own draws (a turn's seed includes its rollout's index in the batch). Causes, for each item not solved by the horizon:

- `wrong: own work`: answered wrong, and its author held the right value of the item's
  dependency (or it has none);
- `wrong: dependency value`: answered wrong by an agent that held a wrong value of the
  dependency (from a wrong post, say);
- `never answered (...)`: nobody submitted it, split by whether it has a dependency and whether
  that was solved (and its value posted), by who held it at the end and in what state (waiting for a message, done,
  fired, cut) or whether it was on nobody's desk, and by how the rollout ended (`idle`: every
  agent waiting or done).

Also counted: values posted as `X=v` in messages, and how many of them were wrong, split by what
their poster submitted for that item: right (the post alone slipped, as retyping a number),
wrong (the work itself), or nothing (a value relayed, or never submitted). Arith only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

import torch

from swarmrl.collective.grading import parse_label
from swarmrl.config import load_config
from swarmrl.rl.loop import load_trained_policy
from swarmrl.scaling.scale import ScaleSpec, check_spec, scale_rollouts

POSTED = re.compile(r"\b([A-Z]+)=(\d+)")


def losses(rollouts: list) -> Counter:
    """Lost items by cause, and posted values (module docstring), over arith rollouts."""
    c: Counter = Counter()
    for r in rollouts:
        items = {it.index: it for it in r.problem.items}
        posted = set()
        for m in r.bus.messages:
            for lab, v in POSTED.findall(m.text):
                if (i := parse_label(lab)) in items:
                    posted.add(i)
                    c["posted values"] += 1
                    if int(v) != items[i].answer:
                        c["posted values, wrong"] += 1
                        c[f"posted values, wrong: {_poster_answer(r, m.sender, i)}"] += 1
        answered = set()
        for s in r.submissions:
            answered.add(s["item"])
            if s["correct"] or s.get("status") == "not_graded":
                continue
            dep = items[s["item"]].dep
            held = r.agents[s["agent"]].known.get(dep) if dep is not None else None
            misled = held is not None and held != str(items[dep].answer)
            c["wrong: dependency value" if misled else "wrong: own work"] += 1
        for i, it in items.items():
            if i not in r.solved and i not in answered:
                why = "no dependency" if it.dep is None else (
                    "dependency lost" if it.dep not in r.solved else
                    f"dependency solved, its value {'posted' if it.dep in posted else 'never posted'}")
                c[f"never answered ({why}; {_holder(r, i)}; rollout ended {r.end_reason})"] += 1
    return c


def _poster_answer(r, sender: str, item: int) -> str:
    """What the poster of a wrong value submitted for that item: its first submission of it."""
    s = next((s for s in r.submissions if s["agent"] == sender and s["item"] == item), None)
    return "its poster submitted nothing for it" if s is None else (
        f"its poster submitted it {'right' if s['correct'] else 'wrong'}")


def _holder(r, item: int) -> str:
    """Who had the item on their desk when the rollout ended, and in what state."""
    a = next((a for a in r.agents.values() if item in a.queue), None)
    if a is None:
        return "on nobody's desk"
    state = "waiting for a message" if a.status == "active" and a.ready_at is None else a.status
    return f"held by {a.role}, {state}"


def grid_rollouts(run: Path, config: Path | None, team_sizes: list[int], horizon: float, problems: int,
                  greedy: bool) -> dict[int, list]:
    """Each team size's rollouts to `horizon`, drawn in one batch as `swarmrl scale RUN --team-sizes
    TEAM_SIZES` draws them (a turn's seed includes its rollout's index in the batch), under `config`
    (default RUN/config.yaml; a bare model directory such as a warm start needs one)."""
    cfg = load_config(config or run / "config.yaml", [])
    policy, _ = load_trained_policy(run)
    torch.set_num_threads(cfg.run.threads)
    spec = check_spec(cfg, ScaleSpec(sorted(set(team_sizes)), [horizon], problems, greedy=greedy))
    return scale_rollouts(cfg, policy, spec, log=lambda *a: None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--greedy", action="store_true")
    ap.add_argument("--team-size", type=int, default=9)
    ap.add_argument("--problems", type=int, default=48)
    ap.add_argument("--horizon", type=float, default=20.0, help="simulated seconds")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--config", type=Path, help="the config to play under (default RUN/config.yaml; "
                    "needed for a bare model directory such as a warm start)")
    args = ap.parse_args(argv)
    team = grid_rollouts(args.run, args.config, [1, 2, 4, 8, args.team_size], args.horizon, args.problems,
                         args.greedy)[args.team_size]
    counts = losses(team)
    out = {"run": str(args.run), "greedy": args.greedy, "team_size": args.team_size, "problems": len(team),
           "horizon_s": args.horizon, "score_mean": sum(r.score for r in team) / len(team),
           "items_lost": sum(r.problem.num_items - len(r.solved) for r in team), "causes": dict(counts)}
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
