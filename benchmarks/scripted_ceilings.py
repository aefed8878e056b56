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

`--latency` asks how soon a team can reach each score of the perfect single agent (the
latency check's ceiling): every strategy runs to `--horizon` s with turns for every item; per
score, the fastest strategy's time over the single agent's; and the time by which every problem
is solved when the fastest strategy is chosen for each problem with hindsight. Reported for the
demonstrated strategies, and again with chain-aware ones added (the CEO takes the longest
dependency chain and solves it itself), which the warm start never demonstrates, and the fastest
two-case rule a CEO could read off the problem (chain-aware where the chain is long).

    .venv/bin/python benchmarks/scripted_ceilings.py --latency --json benchmarks/scripted_latency.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np

from swarmrl.cli import DEMO_CONFIG, resolve_config
from swarmrl.config import load_config
from swarmrl.diagnostics.collective import at_limit, score_steps, snapshot_metrics
from swarmrl.policy.tokenizer import END, build_tokenizer
from swarmrl.build import make_runtime
from swarmrl.scaling.scale import first_reach
from swarmrl.tasks.arith_scripts import Strategy, longest_chain


def all_strategies(max_experts: int) -> list[Strategy]:
    out = [Strategy(0, share="recompute")]
    out += [Strategy(k, share=s, ceo_works=cw, board=b) for k in range(1, max_experts + 1)
            for s in ("wait", "poll", "recompute") for cw in (False, True) for b in (False, True)]
    return out


def hierarchy_strategies(team: int) -> list[Strategy]:
    """The flat board team of `team` agents and its hierarchies with 2, 4 and 8 managers (and
    the square root of the team, rounded), the CEO working in each; each twice: posting every
    result and waiting for the posts an item needs (`wait`), and re-solving a needed item instead
    (`recompute`: what the trained 24-item teams do, posting nothing)."""
    k = team - 1
    ms = sorted({m for m in (2, 4, 8, round(team ** 0.5)) if 1 < m < k})
    return [Strategy(k, share=share, board=True, ceo_works=True, managers=m)
            for share in ("wait", "recompute") for m in (0, *ms)]


def run_strategies(cfg, strategies: list[Strategy], problems: int, horizon: float,
                   turns: int | None = None) -> dict[str, list]:
    """Every strategy on the same held-out problems, never wrong, up to `horizon` s: its rollouts,
    in problem order. `turns` overrides the per-agent turn cap (a script cannot loop)."""
    tok = build_tokenizer()
    runtime, task = make_runtime(cfg, tok)
    if turns is not None:
        runtime.limits = dataclasses.replace(runtime.limits, max_turns_per_agent=turns)
    probs = task.sample(np.random.default_rng(cfg.task.eval_seed), problems)
    rollouts, owner = [], {}
    for strat in strategies:
        for p in probs:
            i = len(rollouts)
            rollouts.append(runtime.new_rollout(i, i, p, horizon, strat.experts))
            owner[i] = strat
    # the task's own demonstrators: they post results as the config's demonstrations do (task.post_demo)
    runtime.run(rollouts, task.scripts().org_actor(tok, tok.convert_tokens_to_ids(END), owner), seed=0)
    return {strat.label(): [r for r in rollouts if owner[r.index] is strat] for strat in strategies}


def run_table(cfg, strategies: list[Strategy], problems: int, limits: list[float]) -> dict:
    """Every strategy on the same held-out problems, never wrong: snapshot metrics at each limit."""
    runs = run_strategies(cfg, strategies, problems, max(limits))
    return {name: {L: snapshot_metrics([at_limit(r, L) for r in mine]) for L in limits} for name, mine in runs.items()}


def short_label(name: str) -> str:
    """A hierarchy strategy's label as the table prints it: `t16/managers8`, `t16/recompute`."""
    return (name.replace("team", "t").replace("/board/wait/ceo-works", "")
            .replace("/board/recompute/ceo-works", "/recompute"))


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
            row = "  ".join(f"{short_label(name)} {m[L]['useful_work']:5.2f}" for name, m in out[team].items())
            print(f"team {team:>3}, {L:>5g} s (items of {args.items}): {row}")
    if args.json:
        Path(args.json).write_text(json.dumps({str(t): {n: {str(L): m for L, m in v.items()} for n, v in tab.items()}
                                               for t, tab in out.items()}, indent=1))


def finish_times(runs: dict[str, list]) -> np.ndarray:
    """[strategies, problems]: when each rollout solved its last item (inf: it never solved all)."""
    return np.array([[max(r.solved.values()) if len(r.solved) == r.problem.num_items else np.inf for r in rs]
                     for rs in runs.values()])


def oracle_finish(T: np.ndarray) -> tuple[float, np.ndarray]:
    """The fastest strategy chosen for each problem with hindsight. T: [strategies, problems]
    finish times. Returns when every problem is solved (the max over problems of the min over
    strategies; inf if no strategy solves some problem) and the per-problem minimum [problems]."""
    per = T.min(axis=0)
    return float(per.max()), per


def best_rule(T: np.ndarray, is_chain: np.ndarray, depth: np.ndarray) -> tuple[float, int, int, int]:
    """The fastest two-case rule a CEO could follow by reading the problem: chain strategy c where
    the longest chain has at least d links, strategy p elsewhere. T: [strategies, problems]
    finish times; is_chain: [strategies] bool; depth: [problems]. Returns (time by which every
    problem is solved, d, p, c), minimised over d and both strategies."""
    best = (np.inf, 0, -1, -1)
    for d in sorted(set(depth.tolist())) + [int(depth.max()) + 1]:  # the last: plain everywhere
        hard = depth >= d
        plain = T[~is_chain][:, ~hard].max(axis=1, initial=0.0)  # [plain strategies]
        chain = T[is_chain][:, hard].max(axis=1, initial=0.0)  # [chain strategies]
        p, c = int(plain.argmin()), int(chain.argmin())
        if max(plain[p], chain[c]) < best[0]:  # ties keep the smaller d
            best = (float(max(plain[p], chain[c])), d, int(np.where(~is_chain)[0][p]), int(np.where(is_chain)[0][c]))
    return best


def chain_strategies(max_experts: int) -> list[Strategy]:
    """Board teams whose CEO first takes the longest dependency chain and solves it itself: not
    among the default warm start's demonstrations (task.chain_demo_rate: 0)."""
    return [Strategy(k, share=s, board=True, chain=True) for k in range(1, max_experts + 1)
            for s in ("wait", "poll", "recompute")]


def latency(args, overrides: list[str]) -> None:
    """The `--latency` table: how soon the scripted strategies reach each score of the perfect
    single agent, over that agent's time (the latency check's ceiling on this task and clock),
    for the demonstrated strategies and with the chain-aware ones added."""
    cfg = load_config(resolve_config(DEMO_CONFIG), overrides)
    shown, chains = all_strategies(cfg.workflow.max_experts), chain_strategies(cfg.workflow.max_experts)
    # Turns for every item, as `scripted_solo_rows` gives the single agent: a script cannot loop.
    runs = run_strategies(cfg, shown + chains, args.problems, args.horizon, turns=2 * cfg.task.items_per_problem + 2)
    steps = {name: score_steps(rs, args.horizon) for name, rs in runs.items()}
    solo = steps[shown[0].label()]
    best = solo[-1][1]
    levels = [x for x in (float(v) for v in args.levels.split(",")) if x < best] + [best]
    print(f"{args.problems} problems to {args.horizon:g} s, every strategy never wrong; the perfect single "
          f"agent's best score {best:.3f} at {first_reach(solo, best):.3f} s")
    out = {"horizon_s": args.horizon, "problems": args.problems, "single_best_score": best,
           "single_levels_s": {f"{x:.4g}": first_reach(solo, x) for x in levels}}
    teams = [s.label() for s in shown[1:] + chains]
    for group, names in (("demonstrated", teams[:len(shown) - 1]), ("with_chain", teams)):
        print(f"{group} ({len(names)} team strategies):")
        out[group] = latency_group({n: runs[n] for n in names}, {n: steps[n] for n in names}, solo, levels, args.tail)
    depth = np.array([len(longest_chain(r.problem)) for r in runs[teams[0]]])
    is_chain = np.array([False] * (len(shown) - 1) + [True] * len(chains))
    at, d, p, c = best_rule(finish_times({n: runs[n] for n in teams}), is_chain, depth)
    full = first_reach(solo, 1.0)
    out["with_chain"]["rule"] = {"all_solved_s": at, "ratio": at / full if full else None, "chain_from_depth": d,
                                 "plain": teams[p], "chain": teams[c]}
    print(f"  the fastest rule a CEO can read off the problem ({teams[c]} where the longest chain has >= {d} "
          f"links, {teams[p]} elsewhere) solves all by {at:.3f} s" + (f" = {at / full:.3f}x" if full else ""))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


def latency_group(runs: dict[str, list], steps: dict[str, list], solo: list, levels: list[float], tail: int) -> dict:
    """One group of strategies: the fastest to each level, and the hindsight oracle's time to all items."""
    out = {"levels": {}}
    for level in levels:
        solo_at = first_reach(solo, level)
        teams = {n: t for n, st in steps.items() if (t := first_reach(st, level)) is not None}
        top = min(teams, key=teams.get) if teams else None
        out["levels"][f"{level:.4g}"] = {"single_s": solo_at, "best_strategy": top,
                                         "best_s": teams.get(top), "ratio": teams[top] / solo_at if top else None}
        print(f"  score {level:.3f}: single agent {solo_at:.3f} s | fastest strategy "
              + (f"{top} {teams[top]:.3f} s = {teams[top] / solo_at:.3f}x" if top else "none reaches it"))
    T = finish_times(runs)
    at, per = oracle_finish(T)
    first = next(iter(runs.values()))
    slow = [{"problem": int(j), "finish_s": float(per[j]), "chain_depth": len(longest_chain(first[j].problem)),
             "strategy": list(runs)[int(T[:, j].argmin())]} for j in np.argsort(per)[::-1][:tail]]
    full = first_reach(solo, 1.0)
    out["oracle"] = {"all_solved_s": at, "ratio": at / full if full else None, "slowest_problems": slow}
    print(f"  the fastest strategy chosen per problem with hindsight solves all by {at:.3f} s"
          + (f" = {at / full:.3f}x the single agent's time" if full else ""))
    for t in slow:
        print(f"    problem {t['problem']}: {t['finish_s']:.3f} s, dependency chain of {t['chain_depth']}, {t['strategy']}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", type=int, default=48)
    ap.add_argument("--limits", default="", help="comma-separated simulated seconds (default: the "
                    "curriculum's first and last deadline, and 1.5x the last)")
    ap.add_argument("--json", help="write every strategy's scores here")
    ap.add_argument("--hierarchy", default="", help="team sizes past the training cap: flat vs managed teams")
    ap.add_argument("--items", type=int, default=64, help="items per problem for --hierarchy")
    ap.add_argument("--latency", action="store_true", help="how soon any strategy reaches the single agent's scores")
    ap.add_argument("--horizon", type=float, default=20.0, help="--latency: simulated seconds to run to")
    ap.add_argument("--levels", default="0.25,0.5,0.75,0.9", help="--latency: the single agent's scores to reach (and its best)")
    ap.add_argument("--tail", type=int, default=6, help="--latency: how many of the slowest problems to list")
    args, overrides = ap.parse_known_args()
    if args.latency:
        return latency(args, overrides)
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
