"""How big and how fast `swarmrl report` is: generation time and size of report.html, time until
the page is interactive in headless Chromium, and the time to draw the timeline of one rollout.

    python benchmarks/report_bench.py RUN [--agents 64] [--json OUT]

RUN: a run directory (e.g. the demo's runs/demo). With `--agents N` it also times a synthetic
step of one rollout with N agents, 8 turns each and 4N messages (the 64-agent case of issue 18),
written into a copy of nothing but that step. Needs chromium (scripts/setup.sh) and playwright.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

from swarmrl.report.html import write_report


def time_to_interactive(browser, report: Path) -> dict:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    t0 = time.perf_counter()
    page.goto(report.resolve().as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=600_000)
    ready = time.perf_counter() - t0
    draw = page.evaluate("""() => { const t = performance.now();
        const steps = JSON.parse(document.getElementById('report-data').textContent).sample_steps;
        window.swarmTimeline.pickStep(steps[steps.length - 1]); return performance.now() - t; }""")
    counts = page.evaluate("() => [document.querySelectorAll('.lane').length, document.querySelectorAll('.turn').length,"
                           " document.querySelectorAll('.msg').length]")
    page.close()
    return {"interactive_s": round(ready, 3), "draw_last_step_ms": round(draw, 1),
            "lanes": counts[0], "turns": counts[1], "arrows": counts[2]}


def synthetic_run(n_agents: int, out: Path) -> Path:
    """One step, one rollout: n agents, 8 turns each, 4n direct messages."""
    rng = random.Random(0)
    names = ["ceo"] + [f"expert-{i}" for i in range(1, n_agents)]
    turns = [{"agent": a, "role": "ceo" if a == "ceo" else "expert", "start": k * 1.0 + j * 0.01,
              "end": k * 1.0 + 0.8, "observation": "x\n>>", "reply": "<done/>", "context_tokens": 100,
              "new_prompt_tokens": 10, "generated_tokens": 20, "actions": [], "errors": [], "after_deadline": False}
             for j, a in enumerate(names) for k in range(8)]
    msgs = []
    for i in range(4 * n_agents):
        t = rng.uniform(0, 7)
        msgs.append({"id": i, "sender": rng.choice(names), "kind": "direct", "to": rng.choice(names),
                     "channel": None, "text": "A=1", "sent_at": t, "deliver_at": t + 0.1})
    row = {"index": 0, "group": 0, "problem_id": "p", "problem": "A:1+1", "time_limit": 8.0, "score": 0.5,
           "finished_at": 8.0, "end_reason": "deadline", "workflow": "org", "solved": {}, "turns": turns,
           "messages": msgs, "submissions": [], "agents": [{"name": a, "role": t["role"]} for a, t in
                                                           zip(names, turns[::8])]}
    (out / "samples").mkdir(parents=True)
    (out / "samples" / "step_0000.jsonl").write_text(json.dumps(row) + "\n")
    (out / "metrics.jsonl").write_text(json.dumps({"step": 0, "score_mean": 0.5}) + "\n")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--agents", type=int, default=64)
    ap.add_argument("--json")
    args = ap.parse_args()
    res = write_report(Path(args.run))
    out = {"report_mb": round(res.bytes / 1e6, 2), "generate_s": round(res.seconds, 3),
           "steps_with_samples": len(list((Path(args.run) / "samples").glob("step_*.jsonl")))}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"], headless=True)
        out["run"] = time_to_interactive(browser, res.path)
        if args.agents:
            with tempfile.TemporaryDirectory() as d:
                syn = write_report(synthetic_run(args.agents, Path(d) / "run"))
                out[f"synthetic_{args.agents}_agents"] = time_to_interactive(browser, syn.path)
        browser.close()
    print(json.dumps(out, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
