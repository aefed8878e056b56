"""`swarmrl` command line: pretrain, train, eval, scale, experiment, sweep, demo, report, view.

A thin layer over the Python API (swarmrl/api.py): each command parses its flags, calls one
API function (or one library function: demo, experiment, sweep, report, view) and prints.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from swarmrl import __version__, api
from swarmrl.config import Config, ConfigError, load_config
from swarmrl.config_load import DEMO_CONFIG, read_yaml, resolve_config


def cmd_pretrain(args, console: Console) -> int:
    from swarmrl.distributed.torchrun import is_writer
    path = api.pretrain(args.config, args.overrides, force=args.force, log=console.print)
    if is_writer():  # one line, not one per rank
        console.print(f"warm-started policy: {path}")
    return 0


def cmd_train(args, console: Console) -> int:
    if args.resume:
        if args.config or args.out or args.init or args.overwrite:
            raise ConfigError("--resume DIR continues that run with its own config.yaml: "
                              "drop CONFIG, --out, --init and --overwrite")
        # Only the keys of rl/loop.py RESUME_OVERRIDABLE may change: e.g. resume a Ray run locally.
        run = api.resume(args.resume, args.overrides, log=console.print)
    else:
        if not args.out:
            raise ConfigError("train needs --out DIR (or --resume DIR)")
        run = api.train(args.config, args.out, args.overrides, init=args.init or None, overwrite=args.overwrite,
                        log=console.print)
    from swarmrl.distributed.torchrun import is_writer
    if is_writer():
        console.print(f"run: {run.path}  (metrics.jsonl, samples/, checkpoints/, plots/)")
    return 0


def _check_eval_args(args) -> None:
    """Flags of eval/scale: a zero or negative count would silently mean 'the config's default'."""
    api.check_eval_inputs(args.checkpoint, args.problems, getattr(args, "team_size", None),
                          getattr(args, "time_limit", None))
    if getattr(args, "json", None) and not Path(args.json).resolve().parent.is_dir():
        raise ConfigError(f"--json {args.json}: the directory {Path(args.json).resolve().parent} does not exist")


def cmd_eval(args, console: Console) -> int:
    _check_eval_args(args)
    m = api.evaluate(args.checkpoint, args.overrides, time_limit=args.time_limit, team_size=args.team_size,
                     problems=args.problems, greedy=args.greedy, config=args.config or None)
    _print_eval(console, m)
    if args.json:
        Path(args.json).write_text(json.dumps(m, indent=2))
    return 0


def _print_eval(console: Console, m: dict, title: str = "evaluation") -> None:
    t = Table(title=title)
    for k in ("score_mean", "time_limit", "team_size_cap", "team_size_mean", "useful_work", "latency_mean",
              "messages_per_rollout", "expert_work_share", "accuracy", "invalid_actions", "problems"):
        if k in m:
            t.add_row(k, f"{m[k]:.4g}" if isinstance(m[k], float) else str(m[k]))
    console.print(t)


@contextmanager
def _timed(phases: dict[str, float], name: str):
    """Add the seconds the block takes to `phases[name]`."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        phases[name] = round(phases.get(name, 0.0) + time.perf_counter() - t0, 2)


def _demo_train(cfg: Config, out: Path, limit: float, phases: dict, console: Console) -> tuple:
    """Warm start, its evaluation, RLCR training: (run, evaluation). Where training's ranks warm-start
    first (policy/start.py `ranks_warm_start`), they start once for both; the evaluation follows."""
    from swarmrl.policy.model import load_policy
    from swarmrl.policy.start import policy_init, ranks_warm_start, warm_start_path
    from swarmrl.rl.evaluate import evaluate
    from swarmrl.rl.loop import train
    warm = "warm start (supervised, on scripted demonstrations of every strategy)"
    rl = f"RLCR training: {cfg.rl.steps} steps, deadline {cfg.time_limit.start:g} -> {cfg.time_limit.end:g} s"

    def evaluated(init: Path, step: str) -> dict:
        console.rule(f"{step} evaluate the warm-started policy at the final time limit ({limit:g} s)")
        with _timed(phases, "evaluate_before"):
            before = evaluate(cfg, load_policy(init), time_limit=limit)
        _print_eval(console, before, "warm start")
        return before

    if ranks_warm_start(cfg):
        console.rule(f"1/4 warm start and 2/4 RLCR training, on the same {cfg.learner.processes} processes")
        console.print(f"{warm}; then {rl}")
        init = warm_start_path(cfg)  # looked up once: the ranks refuse to fill another entry
        with _timed(phases, "train"):
            run = train(cfg, out, init_policy=None, log=console.print, overwrite=True)
        # the ranks' own seconds; their start is in `train`, as where they start twice
        phases["warm_start"] = round(json.loads((init / "warmstart.json").read_text())["seconds"], 2)
        phases["train"] = round(phases["train"] - phases["warm_start"], 2)
        return run, evaluated(init, "3/4")
    console.rule(f"1/4 {warm}")
    with _timed(phases, "warm_start"):
        init = policy_init(cfg, console.print)
    before = evaluated(init, "2/4")
    console.rule(f"3/4 {rl}")
    with _timed(phases, "train"):  # the ranks' start and the final checkpoint and plots included
        run = train(cfg, out, init_policy=init, log=console.print, overwrite=True)
    return run, before


def cmd_demo(args, console: Console) -> int:
    """Warm start -> evaluate -> RLCR training -> evaluate, on the embedded default."""
    import torch
    from swarmrl.rl.evaluate import evaluate
    from swarmrl.rl.loop import load_trained_policy
    from swarmrl.distributed.launch import launch_needed, rank_config
    t0, phases = time.perf_counter(), {}
    cfg = load_config(resolve_config(args.config or DEMO_CONFIG), args.overrides)
    if launch_needed(cfg):  # training's ranks can run here: an error now, not after the warm start
        rank_config(cfg)
    torch.set_num_threads(cfg.run.threads)
    limit = cfg.eval.time_limit or cfg.time_limit.end
    run, before = _demo_train(cfg, Path(args.out), limit, phases, console)
    console.rule("4/4 evaluate the trained policy at the same limit")
    with _timed(phases, "evaluate_after"):
        after = evaluate(cfg, load_trained_policy(run.path)[0], time_limit=limit)
    _print_eval(console, after, "after RLCR")
    metrics = run.read_metrics()
    last = [r for r in metrics[-10:] if "score_mean" in r]  # each at its step's deadline
    from swarmrl.report.html import write_report
    with _timed(phases, "report"):
        report = write_report(run.path).path
    phases["rl_steps"] = round(sum(r.get("step_s", 0.0) for r in metrics), 2)  # within `train`
    summary = {"time_limit": limit, "eval_before": before, "eval_after": after,
               "score_before": before["score_mean"], "score_after": after["score_mean"],
               "train_last10_score": sum(r["score_mean"] for r in last) / len(last) if last else None,
               "train_last10_time_limits": sorted({r["time_limit"] for r in last if "time_limit" in r}),
               "wall_s": time.perf_counter() - t0, "phases_s": phases}
    (run.path / "demo_summary.json").write_text(json.dumps(summary, indent=2))
    console.rule("done")
    console.print(f"score at {limit:g} s: warm start {before['score_mean']:.3f} -> trained {after['score_mean']:.3f} "
                  f"(team size {before['team_size_mean']:.2f} -> {after['team_size_mean']:.2f}, "
                  f"messages/rollout {before['messages_per_rollout']:.1f} -> {after['messages_per_rollout']:.1f})")
    spent = (f"warm start {phases['warm_start']:.0f} s, evaluations {phases['evaluate_before']:.0f} + "
             f"{phases['evaluate_after']:.0f} s, training {phases['train']:.0f} s (RL steps {phases['rl_steps']:.0f} s), "
             f"report {phases['report']:.0f} s")
    console.print(f"run directory: {run.path}\nplots: {run.path / 'plots'}\n"
                  f"summary: {run.path / 'demo_summary.json'}   wall time {summary['wall_s']:.0f} s ({spent})\n"
                  f"report (metrics and the swarm timeline; open it in a browser): {report}", soft_wrap=True)
    return 0


def cmd_report(args, console: Console) -> int:
    """report.html (interactive plots + swarm timeline) and the PNGs in plots/."""
    from swarmrl.report.html import write_report
    from swarmrl.report.plots import plot_run
    res = write_report(Path(args.run), Path(args.out) if args.out else None)
    for w in res.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(w)}", soft_wrap=True)
    if not args.no_png:
        try:
            for p in plot_run(Path(args.run)):
                console.print(str(p))
        except ValueError as e:  # a corrupt metrics line: the HTML skipped it, the PNGs cannot
            console.print(f"[yellow]warning:[/yellow] no PNG plots: {escape(str(e))}", soft_wrap=True)
    console.print(f"report: {res.path}  ({res.bytes / 1e6:.1f} MB, {res.seconds:.1f} s; open it in a browser, "
                  "it needs no network)", soft_wrap=True)
    return 0


def cmd_view(args, console: Console) -> int:
    """The report served on 127.0.0.1, rebuilt on every load (a training run's new steps show)."""
    import threading
    from swarmrl.report.serve import start_server
    server = start_server(Path(args.run), port=args.port, refresh_s=args.refresh)
    console.print(f"report of {args.run}: http://127.0.0.1:{server.server_address[1]}/  (Ctrl-C stops)")
    try:
        threading.Event().wait()  # serve until interrupted
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
    return 0


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"expected comma-separated numbers, got {text!r}") from None


def cmd_scale(args, console: Console) -> int:
    """Score vs latency budget per team size (the collective test-time scaling table)."""
    from swarmrl.report.scaling import fmt
    _check_eval_args(args)
    sizes = [int(x) for x in _floats(args.team_sizes)] if args.team_sizes else None
    res = api.scale(args.checkpoint, team_sizes=sizes,
                    time_limits_s=_floats(args.time_limits) if args.time_limits else None, problems=args.problems,
                    prestaffed=args.prestaffed, out=args.out, config=args.config or None, overrides=args.overrides,
                    items=args.items, greedy=args.greedy, seed=args.seed, log=console.print)
    summary = res.summary
    t = Table(title=f"time to a score (s) and tokens per rollout then; "
                    f"{'greedy' if args.greedy else 'sampled'} decoding")
    targets = [("own single agent", "single_agent", summary.get("single_agent_best_score"))]
    if res.reference:
        targets.append(("perfect single agent", "reference", summary.get("reference_single_best_score")))
    t.add_column("team size")
    for name, _, target in targets:
        t.add_column(f"to {name}'s best ({fmt(target)})")
    t.add_column("best score")
    for k, v in summary["by_team_size"].items():
        cells = [f"{fmt(v.get(f'time_to_{tag}_score_s'), 'never')} ({_tokens(v.get(f'tokens_at_{tag}_score'))})"
                 for _, tag, _ in targets]
        t.add_row(k, *cells, f"{v['best_score']:.3f}")
    console.print(t)
    if res.reference:
        console.print(f"perfect scripted single agent: best {summary['reference_single_best_score']:.3f} "
                      f"first reached at {fmt(summary['reference_time_to_its_best_s'], 'never')} s")
    for p in res.paths:
        console.print(str(p))
    return 0


def _tokens(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def cmd_experiment(args, console: Console) -> int:
    from swarmrl.experiments.latency_shaping import load_experiment, rewrite_report, run_experiment
    known = {"latency-shaping": "experiments/latency_shaping.yaml", "division": "experiments/division.yaml",
             "credit": "experiments/credit.yaml"}
    if args.name not in known:
        raise ConfigError(f"unknown experiment {args.name!r} (known: {', '.join(known)})")
    path = resolve_config(args.config or known[args.name])
    read_yaml(path)  # unreadable or malformed YAML: an error naming the file
    exp = load_experiment(path, args.overrides)
    out = Path(args.out or f"runs/{args.name.replace('-', '_')}")
    if args.report_only:
        report = rewrite_report(exp, out, resolve_config)
    else:
        report = run_experiment(exp, out, resolve_config, init=Path(args.init) if args.init else None,
                                log=console.print)
    console.print(f"report: {report}")
    return 0


def cmd_sweep(args, console: Console) -> int:
    from swarmrl.sweep.run import run_sweep
    grid = resolve_config(args.grid)
    read_yaml(grid)  # unreadable or malformed YAML: an error naming the file
    csv_path, md_path = run_sweep(grid, Path(args.out), log=console.print, jobs=args.jobs)
    console.print(md_path.read_text())
    console.print(f"table: {csv_path}  {md_path}")
    return 0


def _config_keys_epilog() -> str:
    """`train --help`'s list of config keys, one line per section, from the typed config."""
    import dataclasses
    import textwrap
    lines = ["config overrides: key=value after the command, e.g. rl.steps=80 sampler.temperature=0.7",
             "run.loggers=jsonl,tensorboard,wandb. Every key with its type, default and meaning:",
             "docs/config.md (the documentation site's Config reference). Keys by section:", ""]
    top = []
    for f in dataclasses.fields(Config):
        section = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(section):
            keys = ", ".join(g.name for g in dataclasses.fields(section))
            lines += textwrap.wrap(f"{f.name}.{{{keys}}}", 100, initial_indent="  ", subsequent_indent="    ")
        else:
            top.append(f.name)
    if top:
        lines += textwrap.wrap(", ".join(top), 100, initial_indent="  ", subsequent_indent="    ")
    return "\n".join(lines)


def _add_eval_parsers(sub) -> None:
    """`eval` and `scale`: score a trained policy."""
    p = sub.add_parser("eval", help="score a run / checkpoint / model dir on held-out problems")
    p.add_argument("checkpoint")
    p.add_argument("--config", help="config (default: the run's own)")
    p.add_argument("--time-limit", type=float, default=None, help="deadline in simulated seconds")
    p.add_argument("--team-size", type=int, default=None, help="largest team, CEO included")
    p.add_argument("--problems", type=int, default=None)
    p.add_argument("--greedy", action="store_true")
    p.add_argument("--json", help="also write the metrics to this file")
    p.set_defaults(fn=cmd_eval)
    p = sub.add_parser("scale", help="score vs latency budget per team size (collective scaling eval)")
    p.add_argument("checkpoint", help="run dir, checkpoint dir, or model dir (then --config is needed)")
    p.add_argument("--team-sizes", default=None,
                   help="comma-separated, CEO included (default: 1,2,4,8 and the run's full team)")
    p.add_argument("--time-limits", default=None, help="comma-separated simulated seconds")
    p.add_argument("--problems", type=int, default=None, help="held-out problems per team size")
    p.add_argument("--prestaffed", action="store_true", help="hire the team at t=0 instead of capping the CEO")
    p.add_argument("--items", type=int, default=None, help="items per problem (task.items_per_problem; default: the run's)")
    p.add_argument("--greedy", action="store_true",
                   help="decode the most likely token instead of sampling at sampler.temperature")
    p.add_argument("--seed", type=int, default=None, help="sampling seed (default task.eval_seed); same problems")
    p.add_argument("--config", help="config (default: the run's own)")
    p.add_argument("--out", default="scaling", help="directory for scaling.json/.csv and PNGs")
    p.set_defaults(fn=cmd_scale)


def _add_report_parsers(sub) -> None:
    """`report` and `view`: see what a run did."""
    p = sub.add_parser("report", help="write a run's report.html (plots + swarm timeline) and PNG plots")
    p.add_argument("run", help="run directory")
    p.add_argument("--out", help="where to write the HTML (default RUN/report.html)")
    p.add_argument("--no-png", action="store_true", help="skip the PNGs in RUN/plots/")
    p.set_defaults(fn=cmd_report)
    p = sub.add_parser("view", help="serve a run's report on 127.0.0.1, rebuilt on each load (while it trains)")
    p.add_argument("run", help="run directory")
    p.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (0: any free port)")
    p.add_argument("--refresh", type=float, default=30.0, help="seconds between page reloads (0: never)")
    p.set_defaults(fn=cmd_view)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="swarmrl", description=__doc__)
    ap.add_argument("--version", action="version", version=f"swarmrl {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pretrain", help="warm-start the tiny model on scripted demonstrations (cached)")
    p.add_argument("config", nargs="?", default=DEMO_CONFIG)
    p.add_argument("--force", action="store_true", help="retrain even if cached")
    p.set_defaults(fn=cmd_pretrain)
    p = sub.add_parser("train", help="RL training; writes a run directory", epilog=_config_keys_epilog(),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", nargs="?", default=None)
    p.add_argument("--out", help="run directory to create")
    p.add_argument("--init", help="initial policy dir (default: the cached warm start, or model.name_or_path)")
    p.add_argument("--resume", help="continue the run in this directory from its latest checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace an existing run in --out")
    p.set_defaults(fn=cmd_train)
    _add_eval_parsers(sub)
    p = sub.add_parser("demo", help="warm start + RLCR training + evaluation on the embedded default")
    p.add_argument("--config", default=None)
    p.add_argument("--out", default="runs/demo")
    p.set_defaults(fn=cmd_demo)
    p = sub.add_parser("experiment", help="named experiments (latency-shaping, division, credit)")
    p.add_argument("name", help="latency-shaping, division or credit")
    p.add_argument("--config", help="experiment YAML (default configs/experiments/<name>.yaml)")
    p.add_argument("--out", help="output directory (default runs/<name>)")
    p.add_argument("--init", help="warm start dir shared by the arms (default: the cached warm start)")
    p.add_argument("--report-only", action="store_true",
                   help="rewrite report.md and summary.json from a finished --out, running no model")
    p.set_defaults(fn=cmd_experiment)
    p = sub.add_parser("sweep", help="train a grid (workflow x sharing x model x seed) and tabulate it")
    p.add_argument("grid", help="grid YAML, e.g. configs/sweeps/workflow_grid.yaml")
    p.add_argument("--out", default="runs/sweep")
    p.add_argument("--jobs", type=int, default=1,
                   help="runs trained at once, each in its own process (set run.threads so jobs x threads fits the cores)")
    p.set_defaults(fn=cmd_sweep)
    _add_report_parsers(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    # key=value overrides may appear anywhere after the command (argparse's intermixed
    # parsing does not support subcommands, so they are collected from the leftovers).
    args, extra = parser.parse_known_args(argv)
    bad = [x for x in extra if "=" not in x or x.startswith("-")]
    if bad:
        parser.error(f"unrecognized arguments: {' '.join(bad)} (config overrides are key=value)")
    args.overrides = extra
    if getattr(args, "config", None) and "=" in args.config and not Path(args.config).exists():
        args.overrides.insert(0, args.config)  # `swarmrl train rl.steps=2 ...`: no config file given
        args.config = None
    console = Console()
    from swarmrl.runs.checkpoint import CheckpointError
    try:
        return args.fn(args, console)
    # ValueError covers ConfigError, DatasetError and a corrupt model directory; OSError a path
    # that cannot be read or written; YAMLError a YAML file read by another module. Anything
    # else is a bug and keeps its traceback.
    except (ConfigError, CheckpointError, OSError, ValueError, KeyError, yaml.YAMLError) as e:
        # To standard error, so `> log` still shows it. Escaped: paths may contain [...]. Unwrapped.
        Console(stderr=True).print(f"[red]error:[/red] {escape(str(e))}", soft_wrap=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
