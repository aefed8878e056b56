"""The latency-shaping experiment: does a time limit teach a collective to parallelise?

Trains one arm per shaping mode (`time_limit` = RLCR, `penalty`, `none`) from the same warm
start, with the same seed and step budget, then runs the scaling evaluation on each (and on
the warm start itself, as the "before"), and writes one report comparing them:

  OUT/arms/<arm>/          a normal run directory per arm (metrics.jsonl, plots/, final/)
  OUT/scaling/<arm>.json   the scaling table (+ .csv, score/token-vs-latency PNGs)
  OUT/report.md            the comparison, with the checks computed from the tables
  OUT/summary.json         every number the report quotes, and the wall time

Arms whose run directory already holds a `final/` policy are not retrained, so an
interrupted experiment continues where it stopped. The checks are computed and reported
as they come out; nothing here is tuned to make them pass.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import yaml

from swarmrl.config import Config, ConfigError, load_config, suggest
from swarmrl.policy.model import load_policy
from swarmrl.report.scaling import (md_table, plot_grouped_bars, plot_score_vs_latency, plot_tokens_vs_latency,
                                    plot_training_compare)
from swarmrl.scaling.scale import (ScaleSpec, check_spec, run_scaling, score_at, scripted_solo_rows, summarize,
                                   time_to_score, write_table)

WARM = "warm_start"
WINDOW = 10  # steps in the "first" and "last" training windows the checks compare (at most half the run)
REF = "scripted_solo"  # the perfect single agent every team is also compared with
SCORE_TARGETS = (0.25, 0.5, 0.75)  # scores at which the report compares latencies


@dataclass
class ExperimentConfig:
    base: str = "rlcr_arith.yaml"
    """The swarmrl config every arm starts from (a path or a preset name in configs/)."""
    overrides: list[str] = field(default_factory=list)
    """key=value overrides applied to every arm (the shared budget: steps, seed, ...)."""
    arms: dict[str, list[str]] = field(default_factory=dict)
    """Arm name -> its own key=value overrides (at least the shaping mode)."""
    scale: ScaleSpec = field(default_factory=ScaleSpec)
    """The scaling evaluation run on every arm (and on the warm start)."""


def load_experiment(path: Path, extra_overrides: list[str] | None = None) -> ExperimentConfig:
    data = yaml.safe_load(Path(path).read_text()) or {}
    known = ["base", "overrides", "arms", "scale"]
    for k in data:
        if k not in known:
            raise ConfigError(f"unknown experiment key '{k}'{suggest(k, known)}")
    scale = data.get("scale") or {}
    for k in scale:
        if k not in ScaleSpec.__dataclass_fields__:
            raise ConfigError(f"unknown experiment key 'scale.{k}'{suggest(k, list(ScaleSpec.__dataclass_fields__))}")
    arms = data.get("arms") or {}
    if not arms:
        raise ConfigError("the experiment needs at least one arm")
    return ExperimentConfig(base=data.get("base", "rlcr_arith.yaml"),
                            overrides=list(data.get("overrides") or []) + list(extra_overrides or []),
                            arms={str(a): list(o or []) for a, o in arms.items()}, scale=ScaleSpec(**scale))


def arm_configs(exp: ExperimentConfig, resolve) -> dict[str, Config]:
    """Every arm's validated config, before anything runs (bad input fails fast)."""
    cfgs = {arm: load_config(resolve(exp.base), exp.overrides + ov) for arm, ov in exp.arms.items()}
    for arm, cfg in cfgs.items():
        check_spec(cfg, exp.scale)
    return cfgs


def window_steps(rows: list[dict]) -> int:
    """The first/last WINDOW steps, shrunk to half the run so the windows never overlap."""
    return max(1, min(WINDOW, len(rows) // 2))


def _window(rows: list[dict], key: str, first: bool) -> tuple[float | None, float | None]:
    """(mean, standard error) of a per-step metric over the first or last window of steps."""
    n = window_steps(rows)
    vals = [r[key] for r in (rows[:n] if first else rows[-n:]) if isinstance(r.get(key), (int, float))]
    if not vals:
        return None, None
    se = float(np.std(vals, ddof=1) / np.sqrt(len(vals))) if len(vals) > 1 else None
    return float(np.mean(vals)), se


def rises(change: float | None, se: float | None, z: float = 2.0) -> bool:
    """A rise larger than z standard errors of the change: per-step metrics of 32 rollouts are
    noisy, and a move like "0.731 -> 0.736" is not a rise worth the name."""
    return change is not None and se is not None and change > z * se


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def compute_checks(cfg: Config, runs: dict[str, list[dict]], tables: dict[str, list[dict]],
                   summaries: dict[str, dict], reference: list[dict] | None = None) -> dict:
    """The experiment's checks, from the training metrics and the scaling tables.

    "Single agent" is read two ways: the same checkpoint at team size 1, and `reference`,
    the perfect scripted single agent (`..._reference...` keys).
    """
    tight, loose = cfg.time_limit.start, cfg.time_limit.end
    out: dict = {"tight_limit_s": tight, "loose_limit_s": loose, "window_steps": {a: window_steps(r) for a, r in runs.items()}, "arms": {}}
    ref_items = score_at(reference, 1, tight, "useful_work") if reference else None
    for arm, rows in tables.items():
        a = _team_vs_single(rows, summaries[arm], tight, loose)
        if reference:
            a.update(_team_vs_reference(a, summaries[arm], ref_items))
        if arm in runs:
            a.update(_training_change(runs[arm]))
        out["arms"][arm] = a
    _verdicts(out, reference)
    return out


def _team_vs_single(rows: list[dict], s: dict, tight: float, loose: float) -> dict:
    """One arm's teams against its own checkpoint playing alone, at both limits."""
    sizes = sorted({r["team_size"] for r in rows})
    single = score_at(rows, 1, tight, "useful_work") if 1 in sizes else None
    teams = {k: score_at(rows, k, tight, "useful_work") for k in sizes if k > 1}
    best_k = max(teams, key=lambda k: teams[k] or 0.0) if teams else None
    ttss = {int(k): v.get("time_to_single_agent_score_s") for k, v in s["by_team_size"].items()}
    team_t = [t for k, t in ttss.items() if k > 1 and t is not None]
    return {"items_single_at_tight": single, "items_by_team_at_tight": teams, "best_team_size_at_tight": best_k,
            "items_ratio_best_team_vs_single_at_tight": _ratio(teams.get(best_k), single),
            "time_to_single_agent_score_s": ttss,
            "single_agent_best_score": s.get("single_agent_best_score"),
            # Told max=0, a checkpoint that never scores has forgotten how to work alone (RL ran
            # at max_experts only); every comparison with "its" single agent is then vacuous.
            "single_degenerate": s.get("single_agent_best_score") == 0,
            "items_single_at_loose": score_at(rows, 1, loose, "useful_work") if 1 in sizes else None,
            "items_by_team_at_loose": {k: score_at(rows, k, loose, "useful_work") for k in sizes if k > 1},
            "team_beats_single_to_its_best": (min(team_t) < ttss.get(1)) if team_t and ttss.get(1) else False}


def _team_vs_reference(a: dict, s: dict, ref_items: float | None) -> dict:
    """One arm's teams against the perfect scripted single agent (`a`: its _team_vs_single)."""
    teams, best_k = a["items_by_team_at_tight"], a["best_team_size_at_tight"]
    ttrs = {int(k): v.get("time_to_reference_score_s") for k, v in s["by_team_size"].items()}
    ref_t = [t for k, t in ttrs.items() if k > 1 and t is not None]
    return {"items_reference_at_tight": ref_items,
            "items_ratio_best_team_vs_reference_at_tight": _ratio(teams.get(best_k), ref_items),
            "reference_best_score": s.get("reference_single_best_score"),
            "reference_time_to_its_best_s": s.get("reference_time_to_its_best_s"),
            "time_to_reference_score_s": ttrs,
            "team_beats_reference_to_its_best": bool(ref_t) and min(ref_t) < s["reference_time_to_its_best_s"]}


def _training_change(rows: list[dict]) -> dict:
    """`train/<metric>`: first and last window of one arm's training, their ratio and change."""
    a = {}
    for key in ("ref/messages_per_rollout", "ref/expert_work_share", "ref/score_mean", "messages_per_rollout",
                "expert_work_share", "score_mean", "team_size_mean"):
        (f, f_se), (l_, l_se) = _window(rows, key, True), _window(rows, key, False)
        a[f"train/{key}"] = {"first": f, "last": l_, "ratio": _ratio(l_, f),
                             "change": None if f is None or l_ is None else l_ - f,
                             "change_se": None if f_se is None or l_se is None else float(np.hypot(f_se, l_se))}
    return a


def _verdicts(out: dict, reference: list[dict] | None) -> None:
    """The `check_...` keys: the time_limit arm's checks, then whether the none arm rises less."""
    tl, no = out["arms"].get("time_limit"), out["arms"].get("none")
    if not tl:
        return
    out["check_items_2x_at_tight"] = (tl["items_ratio_best_team_vs_single_at_tight"] or 0) >= 2.0
    m = tl.get("train/ref/messages_per_rollout", {})
    out["check_messages_rise_1.5x"] = (m.get("ratio") or 0) >= 1.5
    e = tl.get("train/ref/expert_work_share", {})
    out["check_expert_share_rises"] = rises(e.get("change"), e.get("change_se"))
    out["check_team_reaches_single_best_sooner"] = tl["team_beats_single_to_its_best"]
    ws = out["arms"].get(WARM)
    if ws and ws["items_single_at_tight"]:  # the warm start's single agent: same prior, never RL-trained
        tl["items_ratio_best_team_vs_warm_single_at_tight"] = _ratio(
            tl["items_by_team_at_tight"].get(tl["best_team_size_at_tight"]), ws["items_single_at_tight"])
        out["check_items_2x_warm_single_at_tight"] = (tl["items_ratio_best_team_vs_warm_single_at_tight"] or 0) >= 2.0
    if reference:
        out["check_items_2x_reference_at_tight"] = (tl["items_ratio_best_team_vs_reference_at_tight"] or 0) >= 2.0
        out["check_team_reaches_reference_best_sooner"] = tl["team_beats_reference_to_its_best"]
    if no:
        mt, mn = tl["train/ref/messages_per_rollout"], no["train/ref/messages_per_rollout"]
        et, en = tl["train/ref/expert_work_share"], no["train/ref/expert_work_share"]
        out["check_none_rises_less"] = {
            "messages": (mn.get("ratio") or 0) < (mt.get("ratio") or 0),
            # "As much": time_limit's rise must be real (> 2 SE) and larger than none's.
            "expert_share": rises(et.get("change"), et.get("change_se")) and (en.get("change") or 0) < et["change"]}


def write_report(out: Path, cfg: Config, exp: ExperimentConfig, runs: dict[str, list[dict]],
                 tables: dict[str, list[dict]], summaries: dict[str, dict], checks: dict, info: dict,
                 reference: list[dict] | None = None) -> Path:
    """`out/report.md` and the figures it shows (under `out/figures`)."""
    fig = out / "figures"
    fig.mkdir(parents=True, exist_ok=True)
    tight, loose = checks["tight_limit_s"], checks["loose_limit_s"]
    _plot_figures(fig, runs, tables, checks, tight, loose)
    w = min(checks["window_steps"].values(), default=WINDOW)
    L = [f"# Latency shaping: does a time limit teach a collective to parallelise?\n",
         f"Base config `{exp.base}`, shared overrides `{' '.join(exp.overrides) or '-'}`; arms: "
         + ", ".join(f"**{a}** (`{' '.join(o)}`)" for a, o in exp.arms.items()) + ".",
         f"Same warm start (`{info['init']}`), seed and step budget for every arm. Scaling evaluation: team sizes "
         f"{exp.scale.team_sizes}, {exp.scale.problems} held-out problems each, limits {exp.scale.time_limits_s} s, "
         f"{'pre-staffed org' if exp.scale.prestaffed else 'the CEO may hire up to the team size'}. "
         f"Tight limit = the curriculum's first deadline ({tight:g} s), loose = its last ({loose:g} s). "
         f"Wall time of this invocation {info['wall_s']:.0f} s; training steps (from the arms' metrics) "
         + ", ".join(f"{a} {t:.0f} s" for a, t in info.get("train_s", {}).items()) + ".\n", "## Checks\n"]
    if checks["arms"].get("time_limit", {}):
        L += _check_lines(cfg, checks, tight, w)
    L += _scaling_lines(exp, tables, summaries, tight, loose)
    L += ["## Latency to reach a score\n",
          "The same question at fixed scores below everyone's best (the sources' \"a single agent needs k times "
          "the time\"): the smallest budget (simulated s) at which each agent or team first reaches the score.\n",
          md_table(["who", "team size"] + [f"to {t:g}" for t in SCORE_TARGETS],
                   latency_to_score_rows(tables, reference, SCORE_TARGETS)), ""]
    L += [f"## Training: first vs last {w} steps\n",
          md_table(["arm", "metric", f"first {w}", f"last {w}", "ratio", "change +- s.e."],
                   [[arm, k[6:], v["first"], v["last"], v["ratio"], f"{_f(v['change'])} +- {_f(v['change_se'])}"]
                    for arm, a in checks["arms"].items() for k, v in a.items() if k.startswith("train/")]), "",
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
        [f"time_limit: best team solves >= 2x a single agent's items at {tight:g} s",
         f"team {tl['best_team_size_at_tight']}: {_f(team)} vs "
         f"single {_f(tl['items_single_at_tight'])} = {_f(tl['items_ratio_best_team_vs_single_at_tight'])}x",
         checks["check_items_2x_at_tight"]],
        [f"time_limit: messages/rollout (as of {tight:g} s) last-{w} >= 1.5x first-{w} steps",
         f"{_f(m['first'])} -> {_f(m['last'])} = {_f(m['ratio'])}x", checks["check_messages_rise_1.5x"]],
        [f"time_limit: experts' share of the work (as of {tight:g} s) rises by > 2 standard errors",
         f"{_f(e['first'])} -> {_f(e['last'])} (change {_f(e['change'])} +- {_f(e['change_se'])})",
         checks["check_expert_share_rises"]],
        ["none: neither rises as much (messages ratio, share change)",
         _none_text(checks), all(checks.get("check_none_rises_less", {}).values()) if "check_none_rises_less" in checks else None],
        ["time_limit: a team reaches the single agent's best score sooner",
         ", ".join(f"{k}: {_f(v, 'never')} s" for k, v in tl["time_to_single_agent_score_s"].items()),
         checks["check_team_reaches_single_best_sooner"]]]
    if "items_reference_at_tight" in tl:
        rows += [
            [f"(vs the perfect scripted single agent) best team solves >= 2x its items at {tight:g} s",
             f"{_f(team)} vs {_f(tl['items_reference_at_tight'])}"
             f" = {_f(tl['items_ratio_best_team_vs_reference_at_tight'])}x", checks["check_items_2x_reference_at_tight"]],
            ["(vs the perfect scripted single agent) a team reaches its best score sooner",
             f"it needs {_f(tl['reference_time_to_its_best_s'])} s for {_f(tl['reference_best_score'])}; teams: "
             + ", ".join(f"{k}: {_f(v, 'never')} s" for k, v in tl["time_to_reference_score_s"].items() if k > 1),
             checks["check_team_reaches_reference_best_sooner"]]]
    return [md_table(["check", "measured", "holds"], rows + _other_single_rows(checks)), "",
            "Team size 1 is the trained checkpoint playing alone (header `max=0`); the perfect scripted single agent "
            "is the warm start's solo demonstrator (never wrong, fewest tokens) on the same problems and clock.\n"] + [
        f"**{arm}'s own single agent is degenerate**: told `max=0` it scores 0 at every limit (it tries to "
        f"hire: RL ran with the CEO allowed {cfg.workflow.max_experts} experts, and the shared policy's hiring "
        "carried over to `max=0`; see `rl.smaller_caps_fraction`). Comparisons with its own single agent are "
        "vacuous; read the other single agents.\n"
        for arm, a in checks["arms"].items() if arm != WARM and a.get("single_degenerate")]


def _scaling_lines(exp: ExperimentConfig, tables: dict[str, list[dict]], summaries: dict[str, dict],
                   tight: float, loose: float) -> list[str]:
    """The scaling tables: score at both limits, and time to the single agent's best score."""
    return ["## Score at the tight and loose limits (scaling eval)\n",
            md_table(["arm", "team size"] + [f"score @ {tight:g} s", f"score @ {loose:g} s", f"items @ {tight:g} s",
                                             f"chosen team size @ {loose:g} s", f"experts' share @ {loose:g} s",
                                             f"messages @ {loose:g} s", f"tokens @ {loose:g} s"],
                     [[arm, k, score_at(rows, k, tight), score_at(rows, k, loose), score_at(rows, k, tight, "useful_work"),
                       score_at(rows, k, loose, "team_size_mean"), score_at(rows, k, loose, "expert_work_share"),
                       score_at(rows, k, loose, "messages_per_rollout"), score_at(rows, k, loose, "total_tokens_per_rollout")]
                      for arm, rows in tables.items() for k in sorted({r["team_size"] for r in rows})]), "",
            "## Time to the single agent's best score\n",
            "Smallest latency budget (simulated s) at which each team size first reaches the target score, "
            "and the tokens per rollout it had spent by then (`never`: not within the grid).\n",
            md_table(["arm", "target"] + [f"team {k}: s (tokens)" for k in exp.scale.team_sizes],
                     [[arm, f"{who} {_f(s.get(best))}"] + [
                         f"{_f(s['by_team_size'][str(k)].get(f'time_to_{tag}_score_s'), 'never')} "
                         f"({_f(s['by_team_size'][str(k)].get(f'tokens_at_{tag}_score'))})" for k in exp.scale.team_sizes]
                      for arm, s in summaries.items()
                      for who, tag, best in (("own single agent", "single_agent", "single_agent_best_score"),
                                             ("perfect scripted single agent", "reference", "reference_single_best_score"))
                      if s.get(best) is not None]), ""]


def latency_to_score_rows(tables: dict[str, list[dict]], reference: list[dict] | None,
                          targets: tuple[float, ...]) -> list[list]:
    """[who, team size, time to each target ('never' off the grid)] for every arm and team size."""
    cell = lambda rows, k, t: _f(time_to_score(rows, k, t), "never")  # noqa: E731
    out = [["perfect scripted single", 1] + [cell(reference, 1, t) for t in targets]] if reference else []
    return out + [[arm, k] + [cell(rows, k, t) for t in targets]
                  for arm, rows in tables.items() for k in sorted({r["team_size"] for r in rows})]


def _other_single_rows(checks: dict) -> list[list]:
    """The 2x check against the warm start's single agent, and the same counts at the loose limit."""
    tl, ws = checks["arms"]["time_limit"], checks["arms"].get(WARM)
    team = tl["items_by_team_at_tight"].get(tl["best_team_size_at_tight"])
    rows = []
    if "check_items_2x_warm_single_at_tight" in checks:
        rows.append([f"(vs the warm start's single agent) best team solves >= 2x its items at {checks['tight_limit_s']:g} s",
                     f"{_f(team)} vs {_f(ws['items_single_at_tight'])} = {_f(tl['items_ratio_best_team_vs_warm_single_at_tight'])}x",
                     checks["check_items_2x_warm_single_at_tight"]])
    loose = tl["items_by_team_at_loose"]
    k = max(loose, key=lambda k: loose[k] or 0.0) if loose else None
    if k is not None and ws:
        rows.append([f"(not a check) the same at the loose limit {checks['loose_limit_s']:g} s, where most steps trained",
                     f"team {k}: {_f(loose[k])} vs own single {_f(tl['items_single_at_loose'])}, "
                     f"warm start's single {_f(ws['items_single_at_loose'])}", "-"])
    return rows


def _f(v, none: str = "n/a") -> str:
    return none if v is None else f"{v:.3g}" if isinstance(v, float) else str(v)


def _none_text(checks: dict) -> str:
    tl, no = checks["arms"].get("time_limit"), checks["arms"].get("none")
    if not tl or not no:
        return "n/a"
    en, et = no["train/ref/expert_work_share"], tl["train/ref/expert_work_share"]
    return (f"messages x{_f(no['train/ref/messages_per_rollout']['ratio'])} (none) vs "
            f"x{_f(tl['train/ref/messages_per_rollout']['ratio'])} (time_limit); share change "
            f"{_f(en['change'])} +- {_f(en['change_se'])} (none) vs {_f(et['change'])} +- {_f(et['change_se'])} (time_limit)")


def run_experiment(exp: ExperimentConfig, out: Path, resolve, init: Path | None = None, log=print) -> Path:
    """Train every arm, scale-evaluate every arm and the warm start, write the report."""
    from swarmrl.policy.warmstart import warm_start
    from swarmrl.rl.loop import load_trained_policy, train
    t0 = time.perf_counter()
    cfgs = arm_configs(exp, resolve)
    base = next(iter(cfgs.values()))
    torch.set_num_threads(base.run.threads)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    # Both curriculum ends must be on the grid: the checks are read at them.
    exp.scale.time_limits_s = sorted(set(exp.scale.time_limits_s) | {base.time_limit.start, base.time_limit.end})
    init = Path(init) if init else warm_start(base, log=log)
    runs: dict[str, list[dict]] = {}
    for i, (arm, cfg) in enumerate(cfgs.items()):
        run_dir = out / "arms" / arm
        log(f"[{i + 1}/{len(cfgs)}] train arm {arm!r}: {cfg.rl.steps} steps, shaping {cfg.shaping.mode} -> {run_dir}")
        if not (run_dir / "final").exists():
            train(cfg, run_dir, init_policy=init, log=log, overwrite=True)
        runs[arm] = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    tables, summaries = {}, {}
    policy = load_policy(init)
    reference = scripted_solo_rows(base, policy, exp.scale)
    write_table(reference, summarize(reference), out / "scaling", REF)
    for arm in [WARM] + list(cfgs):
        log(f"scaling evaluation: {arm}")
        policy = policy if arm == WARM else load_trained_policy(out / "arms" / arm)[0]
        rows = run_scaling(base, policy, exp.scale, log=log)
        tables[arm], summaries[arm] = rows, summarize(rows, reference)
        write_table(rows, summaries[arm], out / "scaling", arm)
        plot_score_vs_latency(rows, out / "scaling" / f"{arm}_score_vs_latency.png", f"{arm}: score vs latency budget",
                              {"tight": base.time_limit.start, "loose": base.time_limit.end}, reference=reference)
        plot_tokens_vs_latency(rows, out / "scaling" / f"{arm}_tokens_vs_latency.png", f"{arm}: tokens per rollout")
    checks = compute_checks(base, runs, tables, summaries, reference)
    # Training time from the arms' own step timings: a resumed invocation (arms already trained)
    # would otherwise report only the scaling evaluations' minutes as the experiment's cost.
    info = {"init": str(init), "wall_s": time.perf_counter() - t0,
            "train_s": {arm: float(sum(r.get("step_s", 0.0) for r in rows)) for arm, rows in runs.items()}}
    report = write_report(out, base, exp, runs, tables, summaries, checks, info, reference)
    (out / "summary.json").write_text(json.dumps({"checks": checks, "summaries": summaries, **info,
                                                  "arms": {a: c.to_dict() for a, c in cfgs.items()}}, indent=2))
    log(f"report: {report}  (wall time {info['wall_s']:.0f} s)")
    return report
