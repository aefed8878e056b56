"""Warm-start recipes side by side: time to train, and the prior each gives at the demo's limit.

Each recipe is a comma-separated list of overrides on the demo config (`--config`); each is
trained (or taken from the cache: run with an empty `SWARMRL_CACHE_DIR` to time them all) and
evaluated at the final limit on held-out problems. Train them alone on the machine: the
seconds reported are the warm start's own clock when it was trained.

    .venv/bin/python benchmarks/warmstart_recipe.py warmstart.epochs=3 \
        warmstart.epochs=3,warmstart.batch_sequences=8 --json benchmarks/warmstart_recipe.json

What the RL then makes of a prior is the demo's business: `swarmrl demo <the same overrides>`
reuses the cached warm start.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from swarmrl import api


def measure(config: str, overrides: list[str], time_limit: float, problems: int) -> dict:
    cfg = api.config_of(config, overrides)
    t0 = time.perf_counter()
    model_dir = api.pretrain(cfg, log=lambda *a, **k: None)
    seconds = time.perf_counter() - t0
    stats = json.loads((model_dir / "warmstart.json").read_text())
    m = api.evaluate(model_dir, time_limit=time_limit, problems=problems, config=cfg)
    # `train_seconds` is the warm start's own clock when it was trained, so a cached recipe keeps it.
    # Unrounded: a tiny config trains in hundredths of a second, which one decimal would read as 0.
    return {"overrides": overrides, "seconds": seconds, "train_seconds": stats["seconds"],
            "cached": seconds < stats["seconds"],
            "final_loss": stats["final_loss"], "score": m["score_mean"], "item_accuracy": m["accuracy"],
            "items": m["useful_work"], "team_size": m["team_size_mean"], "warm_start": model_dir.name}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipes", nargs="+", help="comma-separated overrides per recipe, e.g. warmstart.epochs=2")
    ap.add_argument("--config", default="rlcr_arith", help="preset name or YAML the recipes override")
    ap.add_argument("--time-limit", type=float, default=5.5)
    ap.add_argument("--problems", type=int, default=48)
    ap.add_argument("--json", type=Path, help="write the rows here")
    args = ap.parse_args(argv)
    rows = []
    for recipe in args.recipes:
        rows.append(measure(args.config, [o for o in recipe.split(",") if o], args.time_limit, args.problems))
        r = rows[-1]
        cached = " (cached)" if r["cached"] else ""
        print(f"{recipe:60s} trained in {r['train_seconds']:6.1f} s{cached}  loss {r['final_loss']:.3f}  "
              f"score {r['score']:.3f}  item accuracy {r['item_accuracy']:.3f}", flush=True)
    if args.json:
        meta = {"config": args.config, "time_limit": args.time_limit, "problems": args.problems}
        args.json.write_text(json.dumps({**meta, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
