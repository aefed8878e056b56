"""The latency-shaping experiment: does a time limit teach a collective to parallelise?

Trains one arm per shaping mode (`time_limit` = RLCR, `penalty`, `none`) from the same warm
start, with the same seed and step budget, then runs the scaling evaluation on each (and on
the warm start itself, as the "before"), and writes one report comparing them:

  OUT/arms/<arm>/          a normal run directory per arm (metrics.jsonl, plots/, final/)
  OUT/scaling/<arm>.json   the scaling table (+ .csv, score/token-vs-latency PNGs)
  OUT/report.md            the comparison, with the checks computed from the tables
  OUT/summary.json         every number the report quotes, and the wall time

Arms whose run directory already holds a `final/` policy are not retrained, so an
interrupted experiment continues where it stopped; a finished run of another config or from
other initial weights there is an error, not a result. The checks are computed and reported
as they come out; nothing here is tuned to make them pass.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch
import yaml

from swarmrl.config import Config, ConfigError, load_config, suggest
from swarmrl.policy.model import load_policy
from swarmrl.experiments.report import CREDIT_KEYS, REF, WARM, WINDOW, write_report
from swarmrl.experiments.spec import ExperimentConfig
from swarmrl.report.scaling import plot_score_vs_latency, plot_tokens_vs_latency
from swarmrl.scaling.scale import (ScaleSpec, check_spec, run_scaling, score_at, scripted_solo_rows, summarize,
                                   write_table)



def load_experiment(path: Path, extra_overrides: list[str] | None = None) -> ExperimentConfig:
    data = yaml.safe_load(Path(path).read_text()) or {}
    known = ["base", "overrides", "arms", "scale", "title"]
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
    return ExperimentConfig(base=data.get("base", "rlcr_arith.yaml"), title=data.get("title", ExperimentConfig.title),
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


# The RLCR headline's bars (a single agent needs about 4x the time): the best team solves at
# least ITEMS_FACTOR x a single agent's items at the tight limit, and reaches the perfect single
# agent's best score within LATENCY_FACTOR x the time that agent needs.
ITEMS_FACTOR = 3.0
LATENCY_FACTOR = 0.4


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
            # Told `alone`, a checkpoint that never scores has forgotten how to work alone (RL ran
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
            "latency_ratio_best_team_vs_reference": _ratio(min(ref_t) if ref_t else None,
                                                           s.get("reference_time_to_its_best_s"))}


def _training_change(rows: list[dict]) -> dict:
    """`train/<metric>`: first and last window of one arm's training, their ratio and change."""
    a = {}
    for key in ("ref/messages_per_rollout", "ref/expert_work_share", "ref/score_mean", "messages_per_rollout",
                "expert_work_share", "score_mean", "team_size_mean", *CREDIT_KEYS):
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
    out["check_items_3x_at_tight"] = (tl["items_ratio_best_team_vs_single_at_tight"] or 0) >= ITEMS_FACTOR
    m = tl.get("train/ref/messages_per_rollout", {})
    out["check_messages_rise_1.5x"] = (m.get("ratio") or 0) >= 1.5
    e = tl.get("train/ref/expert_work_share", {})
    out["check_expert_share_rises"] = rises(e.get("change"), e.get("change_se"))
    out["check_team_reaches_single_best_sooner"] = tl["team_beats_single_to_its_best"]
    ws = out["arms"].get(WARM)
    if ws and ws["items_single_at_tight"]:  # the warm start's single agent: same prior, never RL-trained
        tl["items_ratio_best_team_vs_warm_single_at_tight"] = _ratio(
            tl["items_by_team_at_tight"].get(tl["best_team_size_at_tight"]), ws["items_single_at_tight"])
        out["check_items_3x_warm_single_at_tight"] = (tl["items_ratio_best_team_vs_warm_single_at_tight"] or 0) >= ITEMS_FACTOR
    if reference:
        out["check_items_3x_reference_at_tight"] = (tl["items_ratio_best_team_vs_reference_at_tight"] or 0) >= ITEMS_FACTOR
        lat = tl["latency_ratio_best_team_vs_reference"]
        out["check_team_reaches_reference_best_at_0.4x"] = lat is not None and lat <= LATENCY_FACTOR
    if no:
        mt, mn = tl["train/ref/messages_per_rollout"], no["train/ref/messages_per_rollout"]
        et, en = tl["train/ref/expert_work_share"], no["train/ref/expert_work_share"]
        out["check_none_rises_less"] = {
            "messages": (mn.get("ratio") or 0) < (mt.get("ratio") or 0),
            # "As much": time_limit's rise must be real (> 2 SE) and larger than none's.
            "expert_share": rises(et.get("change"), et.get("change_se")) and (en.get("change") or 0) < et["change"]}


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
    _add_curriculum_ends(exp, base)
    init = Path(init) if init else warm_start(base, log=log)
    runs: dict[str, list[dict]] = {}
    for i, (arm, cfg) in enumerate(cfgs.items()):
        run_dir = out / "arms" / arm
        log(f"[{i + 1}/{len(cfgs)}] train arm {arm!r}: {cfg.rl.steps} steps, shaping {cfg.shaping.mode} -> {run_dir}")
        if not _finished_arm(run_dir, cfg, init, log):
            train(cfg, run_dir, init_policy=init, log=log, overwrite=True)
        runs[arm] = _metrics(run_dir)
    tables, summaries = {}, {}
    policy = load_policy(init)
    reference = scripted_solo_rows(base, policy, exp.scale)
    write_table(reference, summarize(reference), out / "scaling", REF)
    for arm in [WARM] + list(cfgs):
        log(f"scaling evaluation: {arm}")
        policy = policy if arm == WARM else load_trained_policy(out / "arms" / arm)[0]
        rows = run_scaling(cfgs.get(arm, base), policy, exp.scale, log=log)  # the arm's own groups, roles
        tables[arm], summaries[arm] = rows, summarize(rows, reference)
        write_table(rows, summaries[arm], out / "scaling", arm)
        plot_score_vs_latency(rows, out / "scaling" / f"{arm}_score_vs_latency.png", f"{arm}: score vs latency budget",
                              {"tight": base.time_limit.start, "loose": base.time_limit.end}, reference=reference)
        plot_tokens_vs_latency(rows, out / "scaling" / f"{arm}_tokens_vs_latency.png", f"{arm}: tokens per rollout")
    # Training time from the arms' own step timings: a resumed invocation (arms already trained)
    # would otherwise report only the scaling evaluations' minutes as the experiment's cost.
    info = {"init": str(init), "wall_s": time.perf_counter() - t0,
            "train_s": {arm: float(sum(r.get("step_s", 0.0) for r in rows)) for arm, rows in runs.items()}}
    report = _write(out, exp, cfgs, runs, tables, summaries, reference, info)
    log(f"report: {report}  (wall time {info['wall_s']:.0f} s)")
    return report


def _finished_arm(run_dir: Path, cfg: Config, init: Path, log) -> bool:
    """Whether `run_dir` holds this arm, trained (a finished run of another config or start there
    is an error: reused silently, it would put another arm's numbers in the report)."""
    from swarmrl.rl.reuse import check_same_run
    if not (run_dir / "final").exists():
        return False
    check_same_run(run_dir, cfg, init, log)
    return True


def _add_curriculum_ends(exp: ExperimentConfig, base: Config) -> None:
    """Both curriculum ends must be on the grid: the checks are read at them."""
    exp.scale.time_limits_s = sorted(set(exp.scale.time_limits_s) | {base.time_limit.start, base.time_limit.end})


def _metrics(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]


def _write(out: Path, exp: ExperimentConfig, cfgs: dict[str, Config], runs: dict[str, list[dict]],
           tables: dict[str, list[dict]], summaries: dict[str, dict], reference: list[dict], info: dict) -> Path:
    """The checks, `report.md` with its figures, and `summary.json`."""
    base = next(iter(cfgs.values()))
    checks = compute_checks(base, runs, tables, summaries, reference)
    report = write_report(out, base, exp, runs, tables, summaries, checks, info, reference)
    (out / "summary.json").write_text(json.dumps({"checks": checks, "summaries": summaries, **info,
                                                  "arms": {a: c.to_dict() for a, c in cfgs.items()}}, indent=2))
    return report


def rewrite_report(exp: ExperimentConfig, out: Path, resolve) -> Path:
    """`report.md`, its figures and `summary.json` again from what `run_experiment` left in `out`
    (the arms' metrics, the scaling tables, the first invocation's timings), running no model:
    for a report whose code changed since, in seconds instead of the experiment's minutes."""
    out = Path(out)
    cfgs = arm_configs(exp, resolve)
    base = next(iter(cfgs.values()))
    _add_curriculum_ends(exp, base)
    needed = [out / "summary.json", out / "scaling" / f"{REF}.json"] + [out / "scaling" / f"{a}.json" for a in [WARM, *cfgs]] \
        + [out / "arms" / a / "metrics.jsonl" for a in cfgs]
    if missing := [str(p) for p in needed if not p.exists()]:
        raise ConfigError(f"{out} is not a finished run of this experiment (missing: {', '.join(missing)}); "
                          "run it without --report-only first")
    old = json.loads((out / "summary.json").read_text())
    runs = {a: _metrics(out / "arms" / a) for a in cfgs}
    reference = json.loads((out / "scaling" / f"{REF}.json").read_text())["rows"]
    tables = {a: json.loads((out / "scaling" / f"{a}.json").read_text())["rows"] for a in [WARM, *cfgs]}
    summaries = {a: summarize(rows, reference) for a, rows in tables.items()}
    return _write(out, exp, cfgs, runs, tables, summaries, reference, {k: old[k] for k in ("init", "wall_s", "train_s")})
