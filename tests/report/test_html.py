"""`swarmrl report`: a self-contained report.html, and clear messages on bad input."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from swarmrl.cli import main
from swarmrl.report.html import render_report, write_report
from tests.report.scripted_run import write_scripted_run


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    return write_scripted_run(tmp_path_factory.mktemp("scripted") / "run")


def embedded(page: str, block_id: str):
    m = re.search(rf'<script id="{block_id}"[^>]*>(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


def test_the_page_is_self_contained(scripted):
    page, warnings = render_report(scripted)
    assert warnings == []
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", page)  # nothing loaded from elsewhere
    assert "Plotly" in page and "swarmTimeline" in page
    data = embedded(page, "report-data")
    assert data["sample_steps"] == [0, 1] and data["alerts"] == [
        {"step": 1, "text": ["role_capture:expert: one expert writes every answer"]}]
    assert [r["workflow"] for r in embedded(page, "samples-1")] == ["voting", "eval_opt", "orch_workers"]


def test_text_cannot_close_the_script_block(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"step": 0, "alerts": ["</script><b>x"]}) + "\n")
    page, _ = render_report(run)
    assert "</script><b>" not in page
    assert embedded(page, "report-data")["alerts"][0]["text"] == ["</script><b>x"]


def test_report_cli_writes_html_and_pngs(scripted, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(scripted, run)
    assert main(["report", str(run)]) == 0
    out = capsys.readouterr().out
    assert (run / "report.html").is_file() and (run / "plots" / "score.png").is_file()
    assert f"report: {run / 'report.html'}" in out.replace("\n", "")


def test_missing_run_exits_2(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "no such run directory" in capsys.readouterr().err


def test_a_run_without_samples_still_gets_its_plots(scripted, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(scripted / "metrics.jsonl", run)
    res = write_report(run)
    assert res.path.is_file() and any("no samples, so no swarm timeline" in w for w in res.warnings)


def test_corrupt_lines_are_skipped_and_named(scripted, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(scripted, run)
    with open(run / "samples" / "step_0001.jsonl", "a") as f:
        f.write("{truncated\n")
    with open(run / "metrics.jsonl", "a") as f:
        f.write("not json\n" + json.dumps({"step": 2, "score_mean": 0.3}) + "\n")
    assert main(["report", str(run), "--no-png"]) == 0
    out = capsys.readouterr().out.replace("\n", "")
    assert f"{run / 'samples' / 'step_0001.jsonl'}:4: invalid JSON" in out
    assert f"{run / 'metrics.jsonl'}:3: invalid JSON" in out
    page = (run / "report.html").read_text()
    assert len(embedded(page, "report-data")["metrics"]) == 3 and len(embedded(page, "samples-1")) == 3


def test_the_summary_says_where_the_run_trained(tmp_path):
    from swarmrl.runs.rundir import RunDir
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"step": 0}) + "\n")
    assert "ran on" not in embedded(render_report(run)[0], "report-data")["summary"]  # older runs: nothing claimed
    env = {"step": 0, "versions": {"torch": "2.13.0+cpu"}, "cpu": "AMD EPYC", "gpus": [], "torch_threads": 1,
           "processes": 2, "source": {"commit": "0123456789abcdef", "uncommitted_changes": True}}
    RunDir(run).append_environment(env)
    RunDir(run).append_environment({**env, "step": 5, "gpus": ["NVIDIA H200"]})
    summary = embedded(render_report(run)[0], "report-data")["summary"]
    assert summary["ran on"] == "AMD EPYC (CPU), torch 2.13.0+cpu, 2 process(es) x 1 thread(s)"
    assert summary["commit"] == "0123456789ab with uncommitted changes"
    assert summary["starts and resumes"] == "2, not all on this machine and build"  # resumed on a GPU
