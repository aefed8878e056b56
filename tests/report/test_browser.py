"""report.html in a real browser: Debian's chromium, driven by Playwright (scripts/setup.sh
installs both; Playwright's own browser download is not used). The page loads with no console
errors and no network request; the lanes are the chosen rollout's team; clicking a turn shows
its observation; the deadline line sits at the rollout's time limit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from swarmrl.config import load_config
from swarmrl.policy.model import build_tiny_policy, save_policy
from swarmrl.report.html import write_report
from swarmrl.rl.loop import train
from tests.report.scripted_run import write_scripted_run

REPO = Path(__file__).resolve().parents[2]
FAST = ["eval.val_interval=0", "sampler.max_new_tokens_per_turn=8", "sampler.max_turns_per_agent=2",
        "rl.problems_per_step=1", "rl.rollouts_per_problem=2", "rl.role_grad_interval=0", "run.threads=1",
        "rl.steps=2", "run.samples_keep_all=true"]


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("the browser tests need chromium: run scripts/setup.sh (as root: apt-get install chromium)")
    return path


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[dev]' installs playwright")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"], headless=True)
        yield b
        b.close()


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    cfg = load_config(REPO / "configs" / "tiny_test.yaml", FAST)
    init = tmp_path_factory.mktemp("init") / "policy"
    save_policy(build_tiny_policy(cfg.model), init)
    run = tmp_path_factory.mktemp("real") / "run"
    train(cfg, run, init_policy=init, log=lambda m: None)
    write_report(run)
    return run


class Page:
    """One report opened in a fresh tab, recording console errors and every request."""

    def __init__(self, browser, report: Path):
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.errors, self.requests = [], []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.url = report.resolve().as_uri()
        self.page.goto(self.url)
        self.page.wait_for_selector("body[data-ready='1']")

    def pick(self, step: int, rollout: int) -> None:
        self.page.select_option("#step-select", str(step))
        self.page.select_option("#rollout-select", str(rollout))

    def lanes(self) -> list[str]:
        return self.page.eval_on_selector_all(".lane", "ls => ls.map(l => l.dataset.agent)")


def rows(run: Path, step: int) -> list[dict]:
    return [json.loads(x) for x in (run / "samples" / f"step_{step:04d}.jsonl").read_text().splitlines() if x]


def test_real_run_step_rollout_turn_detail(browser, tiny_run, tmp_path):
    view = Page(browser, tiny_run / "report.html")
    view.pick(1, 1)
    row = rows(tiny_run, 1)[1]
    assert view.lanes() == [a["name"] for a in row["agents"]]
    assert view.page.locator(".turn").count() == len(row["turns"])
    last = len(row["turns"]) - 1
    view.page.locator(f'.turn[data-index="{last}"]').click()
    shown = view.page.inner_text("#detail pre.observation")
    assert shown == row["turns"][last]["observation"]
    assert view.page.inner_text("#detail pre.reply") == row["turns"][last]["reply"]
    x = float(view.page.get_attribute("#deadline", "x1"))
    assert float(view.page.get_attribute("#deadline", "data-time")) == row["time_limit"]
    assert x == pytest.approx(view.page.evaluate(f"window.swarmTimeline.xOf({row['time_limit']})"))
    assert view.page.locator(".plot").count() >= 3  # the metric plots drew
    assert view.page.locator('.plot[data-title="speed: seconds per step"]').count() == 1  # step_s, rollout_s
    view.page.locator("#timeline").screenshot(path=str(tmp_path / "timeline.png"))
    assert (tmp_path / "timeline.png").stat().st_size > 0
    assert view.errors == [] and view.requests == [view.url]


def test_scripted_org_and_workflows_draw_every_mark(browser, tmp_path):
    run = write_scripted_run(tmp_path / "run")
    write_report(run)
    view = Page(browser, run / "report.html")
    org = rows(run, 0)[0]
    assert view.lanes() == [a["name"] for a in org["agents"]]
    arrows = sum(len(v) for v in org["deliveries"].values())
    assert view.page.locator(".msg").count() == arrows > 0
    for kind in ("hire", "fire", "read", "post", "submission"):
        assert view.page.locator(f".mark.{kind}").count() > 0, kind
    for i, wf in enumerate(rows(run, 1)):  # fixed workflows: the router's lane on top, then the roles
        view.pick(1, i)
        assert view.lanes() == ["wf"] + [a["name"] for a in wf["agents"]], wf["workflow"]
        assert view.page.locator(".msg.workflow").count() == sum(len(v) for v in wf["deliveries"].values())
    assert view.errors == [] and view.requests == [view.url]
