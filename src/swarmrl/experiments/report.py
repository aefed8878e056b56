"""The experiments' report: `report.md` and its figures, from the arms' training metrics, the
scaling tables and the checks (experiments/latency_shaping.py computes them). Shared by every
experiment built on `run_experiment` (latency shaping, division of labour); the checks section
appears when the experiment has a `time_limit` arm.
"""

from __future__ import annotations

from pathlib import Path
import numpy as np

from swarmrl.config import Config
from swarmrl.experiments.spec import ExperimentConfig
from swarmrl.report.plots import rolling_mean, series, steps
from swarmrl.report.scaling import fmt, md_table, plot_grouped_bars, plot_training_compare
from swarmrl.scaling.scale import score_at, time_to_score

WARM = "warm_start"
WINDOW = 10  # steps in the "first" and "last" training windows the checks compare (at most half the run)
REF = "scripted_solo"  # the perfect single agent every team is also compared with
SCORE_TARGETS = (0.25, 0.5, 0.75)  # scores at which the report compares latencies
GAINS = (0.05, 0.1, 0.15)  # training-score gains over each arm's own start that the report times
SMOOTH = 5  # steps in the trailing mean that the steps-to-a-score table reads
# Credit diagnostics (rl/credit.py `credit_metrics`), plotted and tabulated where a run logged them.
CREDIT_KEYS = ("role/expert/idle_share", "messages_followed_share", "messages_used_share")


def write_report(out: Path, cfg: Config, exp: ExperimentConfig, runs: dict[str, list[dict]],
                 tables: dict[str, list[dict]], summaries: dict[str, dict], checks: dict, info: dict,
                 reference: list[dict] | None = None) -> Path:
    """`out/report.md` and the figures it shows (under `out/figures`)."""
    fig = out / "figures"
    fig.mkdir(parents=True, exist_ok=True)
    tight, loose = checks["tight_limit_s"], checks["loose_limit_s"]
    _plot_figures(fig, runs, tables, checks, tight, loose)
    w = min(checks["window_steps"].values(), default=WINDOW)
    L = [f"# {exp.title}\n",
         f"Base config `{exp.base}`, shared overrides `{' '.join(exp.overrides) or '-'}`; arms: "
         + ", ".join(f"**{a}** (`{' '.join(o)}`)" for a, o in exp.arms.items()) + ".",
         f"Same warm start (`{Path(info['init']).name}`: its cache key names it, wherever it lives), seed and step "
         f"budget for every arm. Scaling evaluation: team sizes "
         f"{exp.scale.team_sizes}, {exp.scale.problems} held-out problems each, limits {exp.scale.time_limits_s} s, "
         f"{'pre-staffed org' if exp.scale.prestaffed else 'the CEO may hire up to the team size'}, "
         f"{'greedy decoding' if exp.scale.greedy else 'decoding sampled as in training'}. "
         f"Tight limit = the curriculum's first deadline ({tight:g} s), loose = its last ({loose:g} s). "
         f"Wall time of this invocation {info['wall_s']:.0f} s; training steps (from the arms' metrics) "
         + ", ".join(f"{a} {t:.0f} s" for a, t in info.get("train_s", {}).items()) + ".\n"]
    if checks["arms"].get("time_limit", {}):
        L += ["## Checks\n"] + _check_lines(cfg, checks, tight, w)
    L += _steps_to_score_lines(runs)
    L += _scaling_lines(exp, tables, summaries, tight, loose)
    L += ["## Latency to reach a score\n",
          "The same question at fixed scores below everyone's best (the sources' \"a single agent needs k times "
          "the time\"): the latency (simulated s, exact) at which each agent or team first reaches the score.\n",
          md_table(["who", "team size"] + [f"to {t:g}" for t in SCORE_TARGETS],
                   latency_to_score_rows(tables, reference, SCORE_TARGETS)), ""]
    L += [f"## Training: first vs last {w} steps\n",
          md_table(["arm", "metric", f"first {w}", f"last {w}", "ratio", "change +- s.e."],
                   [[arm, k[6:], v["first"], v["last"], v["ratio"], f"{fmt(v['change'])} +- {fmt(v['change_se'])}"]
                    for arm, a in checks["arms"].items() for k, v in a.items()
                    if k.startswith("train/") and v["first"] is not None]), "",
          "## Figures\n"]
    L += [f"![{p.stem}](figures/{p.name})" for p in sorted(fig.glob("*.png"))]
    L += [f"![{arm}](scaling/{arm}_score_vs_latency.png)" for arm in tables]
    path = out / "report.md"
    path.write_text("\n".join(L) + "\n")
    return path


def _plot_figures(fig: Path, runs: dict[str, list[dict]], tables: dict[str, list[dict]], checks: dict,
                  tight: float, loose: float) -> None:
    plot_training_compare(runs, ["ref/messages_per_rollout", "ref/expert_work_share", "ref/score_mean",
                                 "ref/team_size_mean"], fig / "training_at_ref_limit.png",
                          f"training, measured as of the tight limit ({tight:g} s), every arm")
    plot_training_compare(runs, ["reward_mean", "score_mean", "latency_mean", "messages_per_rollout"],
                          fig / "training_own_limit.png", "training, at each arm's own deadline")
    plot_training_compare(runs, ["ref/score_mean", *CREDIT_KEYS], fig / "training_credit.png",
                          "training score (as of the tight limit) and credit diagnostics, every arm")
    plot_grouped_bars({arm: {str(k): score_at(rows, k, loose, "useful_work") for k in sorted({r["team_size"] for r in rows})}
                       for arm, rows in tables.items()}, fig / "useful_work_by_team_size.png",
                      f"items solved per rollout by {loose:g} s", "useful work by team size (scaling eval)")
    plot_grouped_bars({arm: {str(k): v for k, v in checks["arms"][arm]["time_to_single_agent_score_s"].items()}
                       for arm in tables}, fig / "time_to_single_agent_score.png", "simulated s",
                      "latency to reach the single agent's best score (no bar: never)")


def _check_lines(cfg: Config, checks: dict, tight: float, w: int) -> list[str]:
    """The checks table (the time_limit arm is there) and a warning per degenerate single agent."""
    tl = checks["arms"]["time_limit"]
    m, e = tl["train/ref/messages_per_rollout"], tl["train/ref/expert_work_share"]
    team = tl["items_by_team_at_tight"].get(tl["best_team_size_at_tight"])
    rows = [
        [f"time_limit: best team solves >= 3x a single agent's items at {tight:g} s",
         f"team {tl['best_team_size_at_tight']}: {fmt(team)} vs "
         f"single {fmt(tl['items_single_at_tight'])} = {fmt(tl['items_ratio_best_team_vs_single_at_tight'])}x",
         checks["check_items_3x_at_tight"]],
        [f"time_limit: messages/rollout (as of {tight:g} s) last-{w} >= 1.5x first-{w} steps",
         f"{fmt(m['first'])} -> {fmt(m['last'])} = {fmt(m['ratio'])}x", checks["check_messages_rise_1.5x"]],
        [f"time_limit: experts' share of the work (as of {tight:g} s) rises by > 2 standard errors",
         f"{fmt(e['first'])} -> {fmt(e['last'])} (change {fmt(e['change'])} +- {fmt(e['change_se'])})",
         checks["check_expert_share_rises"]],
        ["none: neither rises as much (messages ratio, share change)",
         _none_text(checks), all(checks.get("check_none_rises_less", {}).values()) if "check_none_rises_less" in checks else None],
        ["time_limit: a team reaches the single agent's best score sooner",
         ", ".join(f"{k}: {_seconds(v)}" for k, v in tl["time_to_single_agent_score_s"].items()),
         checks["check_team_reaches_single_best_sooner"]]]
    if "items_reference_at_tight" in tl:
        rows += [
            [f"(vs the perfect scripted single agent) best team solves >= 3x its items at {tight:g} s",
             f"{fmt(team)} vs {fmt(tl['items_reference_at_tight'])}"
             f" = {fmt(tl['items_ratio_best_team_vs_reference_at_tight'])}x", checks["check_items_3x_reference_at_tight"]],
            ["(vs the perfect scripted single agent) a team reaches its best score in <= 0.4x its time",
             f"it needs {fmt(tl['reference_time_to_its_best_s'])} s for {fmt(tl['reference_best_score'])}; teams: "
             + ", ".join(f"{k}: {_seconds(v)}" for k, v in tl["time_to_reference_score_s"].items() if k > 1)
             + f" (best: {_times(tl.get('latency_ratio_best_team_vs_reference'))})",
             checks["check_team_reaches_reference_best_at_0.4x"]]]
    return [md_table(["check", "measured", "holds"], rows + _other_single_rows(checks)), "",
            "Team size 1 is the trained checkpoint playing alone (header `alone`); the perfect scripted single agent "
            "is the warm start's solo demonstrator (never wrong, fewest tokens) on the same problems and clock.\n"] + [
        f"**{arm}'s own single agent is degenerate**: told `alone` it scores 0 at every limit (it tries to "
        f"hire: RL ran with the CEO allowed {cfg.workflow.max_experts} experts, and the shared policy's hiring "
        "carried over to `alone`; see `rl.smaller_caps_fraction`). Comparisons with its own single agent are "
        "vacuous; read the other single agents.\n"
        for arm, a in checks["arms"].items() if arm != WARM and a.get("single_degenerate")]


def _scaling_lines(exp: ExperimentConfig, tables: dict[str, list[dict]], summaries: dict[str, dict],
                   tight: float, loose: float) -> list[str]:
    """The scaling tables: score at both limits, and time to the single agent's best score."""
    return ["## Score at the tight and loose limits (scaling eval)\n",
            md_table(["arm", "team size"] + [f"score @ {tight:g} s", f"score @ {loose:g} s", f"items @ {tight:g} s",
                                             f"chosen team size @ {loose:g} s", f"experts' share @ {loose:g} s",
                                             f"messages @ {loose:g} s", f"tokens @ {loose:g} s",
                                             f"critical steps @ {loose:g} s", f"idle agents @ {loose:g} s"],
                     [[arm, k, score_at(rows, k, tight), score_at(rows, k, loose), score_at(rows, k, tight, "useful_work"),
                       score_at(rows, k, loose, "team_size_mean"), score_at(rows, k, loose, "expert_work_share"),
                       score_at(rows, k, loose, "messages_per_rollout"), score_at(rows, k, loose, "total_tokens_per_rollout"),
                       score_at(rows, k, loose, "critical_steps"), score_at(rows, k, loose, "idle_agents_per_rollout")]
                      for arm, rows in tables.items() for k in sorted({r["team_size"] for r in rows})]), "",
            "## Time to the single agent's best score\n",
            "Latency (simulated s) at which each team size first reaches the target score, exact from the "
            "rollouts' solve times, and the tokens per rollout it had spent by the first grid limit at or past "
            "it (`never`: not by the largest limit).\n",
            md_table(["arm", "target"] + [f"team {k}: s (tokens)" for k in exp.scale.team_sizes],
                     [[arm, f"{who} {fmt(s.get(best))}"] + [
                         f"{fmt(s['by_team_size'][str(k)].get(f'time_to_{tag}_score_s'), 'never')} "
                         f"({fmt(s['by_team_size'][str(k)].get(f'tokens_at_{tag}_score'))})" for k in exp.scale.team_sizes]
                      for arm, s in summaries.items()
                      for who, tag, best in (("own single agent", "single_agent", "single_agent_best_score"),
                                             ("perfect scripted single agent", "reference", "reference_single_best_score"))
                      if s.get(best) is not None]), ""]


def _seconds(v: float | None) -> str:
    return "never" if v is None else f"{fmt(v)} s"


def _times(v: float | None) -> str:
    return "none reaches it" if v is None else f"{fmt(v)}x"


def latency_to_score_rows(tables: dict[str, list[dict]], reference: list[dict] | None,
                          targets: tuple[float, ...]) -> list[list]:
    """[who, team size, time to each target ('never': not by the largest limit)] for every arm and team size."""
    cell = lambda rows, k, t: fmt(time_to_score(rows, k, t), "never")  # noqa: E731
    out = [["perfect scripted single", 1] + [cell(reference, 1, t) for t in targets]] if reference else []
    return out + [[arm, k] + [cell(rows, k, t) for t in targets]
                  for arm, rows in tables.items() for k in sorted({r["team_size"] for r in rows})]


def _other_single_rows(checks: dict) -> list[list]:
    """The 3x check against the warm start's single agent, and the same counts at the loose limit."""
    tl, ws = checks["arms"]["time_limit"], checks["arms"].get(WARM)
    team = tl["items_by_team_at_tight"].get(tl["best_team_size_at_tight"])
    rows = []
    if "check_items_3x_warm_single_at_tight" in checks:
        rows.append([f"(vs the warm start's single agent) best team solves >= 3x its items at {checks['tight_limit_s']:g} s",
                     f"{fmt(team)} vs {fmt(ws['items_single_at_tight'])} = {fmt(tl['items_ratio_best_team_vs_warm_single_at_tight'])}x",
                     checks["check_items_3x_warm_single_at_tight"]])
    loose = tl["items_by_team_at_loose"]
    k = max(loose, key=lambda k: loose[k] or 0.0) if loose else None
    if k is not None and ws:
        rows.append([f"(not a check) the same at the loose limit {checks['loose_limit_s']:g} s, where most steps trained",
                     f"team {k}: {fmt(loose[k])} vs own single {fmt(tl['items_single_at_loose'])}, "
                     f"warm start's single {fmt(ws['items_single_at_loose'])}", "-"])
    return rows


def _none_text(checks: dict) -> str:
    tl, no = checks["arms"].get("time_limit"), checks["arms"].get("none")
    if not tl or not no:
        return "n/a"
    en, et = no["train/ref/expert_work_share"], tl["train/ref/expert_work_share"]
    return (f"messages x{fmt(no['train/ref/messages_per_rollout']['ratio'])} (none) vs "
            f"x{fmt(tl['train/ref/messages_per_rollout']['ratio'])} (time_limit); share change "
            f"{fmt(en['change'])} +- {fmt(en['change_se'])} (none) vs {fmt(et['change'])} +- {fmt(et['change_se'])} (time_limit)")


def steps_to_reach(rows: list[dict], key: str, target: float, window: int = SMOOTH) -> int | None:
    """First step at which the trailing `window`-step mean of `key` is >= target (None: never)."""
    y = rolling_mean(series(rows, key), window)  # [N]
    hit = np.flatnonzero(np.nan_to_num(y, nan=-np.inf) >= target)
    return int(steps(rows)[hit[0]]) if hit.size else None


def _steps_to_score_lines(runs: dict[str, list[dict]], key: str = "score_mean") -> list[str]:
    """Training speed: steps until each arm's smoothed training score (at its own deadline, the
    reward it trains on) first gains GAINS over its own start (the mean of its first SMOOTH steps).
    Own starts, not a common one: arms with another deadline (penalty: the safety cap) start
    elsewhere, and the gain is the question."""
    rows_out = []
    for arm, rows in runs.items():
        first = [v for v in series(rows[:SMOOTH], key) if np.isfinite(v)]
        if not first:
            continue
        start = float(np.mean(first))
        rows_out.append([arm, f"{start:.3f}"] + [fmt(steps_to_reach(rows, key, start + g), "never") for g in GAINS])
    if not rows_out:
        return []
    return ["## Training: steps to reach a score\n",
            f"First step at which the {SMOOTH}-step trailing mean of `{key}` (each arm at its own deadline) "
            f"reaches the arm's start (the mean of its first {SMOOTH} steps) plus a gain (`never`: not within "
            "the run).\n",
            md_table(["arm", "start"] + [f"+{g:g}" for g in GAINS], rows_out), ""]
