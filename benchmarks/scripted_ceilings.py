"""What each scripted strategy scores at each deadline: the ceilings RL can select among.

Every strategy the warm start demonstrates (tasks/arith_scripts.py: solo, or k = 1..8 experts
x wait / poll / recompute x the CEO working or not x briefed or from the board) runs, never wrong, through the real
runtime and clock of the demo config on the same held-out problems. Scores at every limit are
read off one timeline per rollout (as in the scaling evaluation). This is how the demo's
deadline was chosen, and what bounds the latency-shaping checks: e.g. the best team's items
at the tight limit over the solo agent's.

    .venv/bin/python benchmarks/scripted_ceilings.py [--problems 48] [--limits 4.5,5.5] [--json OUT] [key=value ...]

`--hierarchy 16,32,64` asks instead what the clock allows past the training cap (village to
city): for each team size T, on `--items`-item problems, the perfect single agent, the flat
board team (the CEO hires all T - 1 experts in one turn and works too) and hierarchies (the CEO
hires m managers, each hires its share of the rest: workflow.manager_hires), never wrong.

    .venv/bin/python benchmarks/scripted_ceilings.py --hierarchy 16,32,64 --items 64 --problems 16 --limits 4,6,8,12
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from swarmrl.cli import DEMO_CONFIG, resolve_config
from swarmrl.config import load_config
from swarmrl.diagnostics.collective import at_limit, snapshot_metrics
from swarmrl.policy.tokenizer import END, build_tokenizer
from swarmrl.build import make_runtime
from swarmrl.tasks.arith_scripts import ScriptedActor, Strategy


def all_strategies(max_experts: int) -> list[Strategy]:
    out = [Strategy(0, share="recompute")]
    out += [Strategy(k, share=s, ceo_works=cw, board=b) for k in range(1, max_experts + 1)
            for s in ("wait", "poll", "recompute") for cw in (False, True) for b in (False, True)]
    return out


def hierarchy_strategies(team: int) -> list[Strategy]:
    """The flat board team of `team` agents and its hierarchies with 2, 4 and 8 managers (and
    the square root of the team, rounded), the CEO working in each."""
    k = team - 1
    ms = sorted({m for m in (2, 4, 8, round(team ** 0.5)) if 1 < m < k})
    return [Strategy(k, board=True, ceo_works=True)] + [Strategy(k, board=True, ceo_works=True, managers=m) for m in ms]


def run_table(cfg, strategies: list[Strategy], problems: int, limits: list[float]) -> dict:
    """Every strategy on the same held-out problems, never wrong: snapshot metrics at each limit."""
    tok = build_tokenizer()
    runtime, task = make_runtime(cfg, tok)
    probs = task.sample(np.random.default_rng(cfg.task.eval_seed), problems)
    rollouts, owner = [], {}
    for strat in strategies:
        for p in probs:
            i = len(rollouts)
            rollouts.append(runtime.new_rollout(i, i, p, max(limits), strat.experts))
            owner[i] = strat
    runtime.run(rollouts, ScriptedActor(tok, tok.convert_tokens_to_ids(END), owner), seed=0)
    table = {}
    for strat in strategies:
        mine = [r for r in rollouts if owner[r.index] is strat]
        table[strat.label()] = {L: snapshot_metrics([at_limit(r, L) for r in mine]) for L in limits}
    return table


def hierarchy(args, overrides: list[str], limits: list[float]) -> None:
    """The `--hierarchy` table: flat and managed teams of each size past the training cap."""
    teams = [int(x) for x in args.hierarchy.split(",")]
    turns = args.items + 8  # a single agent works one item per turn
    cfg = load_config(resolve_config(DEMO_CONFIG), [
        f"task.items_per_problem={args.items}", f"eval.max_team_size={max(teams)}",
        f"workflow.manager_hires={max(teams)}", "model.max_context_tokens=8192",
        f"sampler.max_turns_per_agent={turns}", f"sampler.max_new_tokens_per_turn={max(teams) + 64}"] + overrides)
    out = {}
    for team in teams:
        strategies = [Strategy(0, share="recompute")] + hierarchy_strategies(team)
        out[team] = run_table(cfg, strategies, args.problems, limits)
        for L in limits:
            row = "  ".join(f"{name.replace('team', 't').replace('/board/wait/ceo-works', '')} "
                            f"{m[L]['useful_work']:5.2f}" for name, m in out[team].items())
            print(f"team {team:>3}, {L:>5g} s (items of {args.items}): {row}")
    if args.json:
        Path(args.json).write_text(json.dumps({str(t): {n: {str(L): m for L, m in v.items()} for n, v in tab.items()}
                                               for t, tab in out.items()}, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", type=int, default=48)
    ap.add_argument("--limits", default="", help="comma-separated simulated seconds (default: the "
                    "curriculum's first and last deadline, and 1.5x the last)")
    ap.add_argument("--json", help="write every strategy's scores here")
    ap.add_argument("--hierarchy", default="", help="team sizes past the training cap: flat vs managed teams")
    ap.add_argument("--items", type=int, default=64, help="items per problem for --hierarchy")
    args, overrides = ap.parse_known_args()
    if args.hierarchy:
        return hierarchy(args, overrides, [float(x) for x in (args.limits or "4,6,8,12").split(",")])
    cfg = load_config(resolve_config(DEMO_CONFIG), overrides)
    tl = cfg.time_limit
    limits = [float(x) for x in args.limits.split(",")] if args.limits else [tl.start, tl.end, 1.5 * tl.end]
    strategies = all_strategies(cfg.workflow.max_experts)
    table = run_table(cfg, strategies, args.problems, limits)
    solo = table[strategies[0].label()]
    print(f"{len(strategies)} strategies x {args.problems} problems, demo clock; items solved of "
          f"{cfg.task.items_per_problem} (score x items)")
    for L in limits:
        items = {name: t[L]["useful_work"] for name, t in table.items()}
        best = max(items, key=items.get)
        print(f"{L:>5g} s: solo {solo[L]['useful_work']:.2f} items (score {solo[L]['score_mean']:.3f}) | best {best} "
              f"{items[best]:.2f} items (score {table[best][L]['score_mean']:.3f}) = {items[best] / max(solo[L]['useful_work'], 1e-9):.2f}x solo"
              f" | mean over strategies score {np.mean([t[L]['score_mean'] for t in table.values()]):.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({name: {str(L): m for L, m in t.items()} for name, t in table.items()}, indent=2))


if __name__ == "__main__":
    main()
