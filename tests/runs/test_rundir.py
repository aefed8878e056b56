import io
import json
import math

import numpy as np
import pytest
import torch
from rich.console import Console

from swarmrl.runs.progress import TrainProgress, format_value
from swarmrl.runs.rundir import RunDir, read_jsonl


def test_create_writes_config_in_order(tmp_path):
    cfg = {"seed": 3, "model": {"name": "tiny", "layers": 2}, "alpha": 0.5}
    rd = RunDir.create(tmp_path / "run", cfg)
    assert rd.config_path.read_text().startswith("seed: 3\n")  # sort_keys=False
    assert rd.read_config() == cfg
    assert rd.plots_dir == rd.path / "plots"
    assert rd.checkpoints_dir == rd.path / "checkpoints"
    assert rd.samples_dir == rd.path / "samples"


def test_create_refuses_existing_run_without_overwrite(tmp_path):
    rd = RunDir.create(tmp_path, {"a": 1})
    rd.append_metrics({"step": 0})
    with pytest.raises(FileExistsError, match="--resume"):
        RunDir.create(tmp_path, {"a": 2})
    (tmp_path / "unrelated.txt").write_text("keep me")
    rd.write_samples(0, [{"x": 1}])
    rd2 = RunDir.create(tmp_path, {"a": 2}, overwrite=True)
    assert rd2.read_config() == {"a": 2}
    assert rd2.read_metrics() == []
    assert not rd2.samples_dir.exists()
    assert (tmp_path / "unrelated.txt").read_text() == "keep me"


def test_open_for_resume_requires_config(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.yaml"):
        RunDir.open_for_resume(tmp_path)
    RunDir.create(tmp_path, {"a": 1})
    assert RunDir.open_for_resume(tmp_path).read_config() == {"a": 1}


def test_metrics_round_trip_with_numpy_torch_and_nan(tmp_path):
    rd = RunDir.create(tmp_path, {})
    rd.append_metrics({
        "step": np.int64(1),
        "score_mean": np.float32(0.5),
        "loss": torch.tensor(0.25),
        "grad_norm": float("nan"),
        "entropy": torch.tensor(float("inf")),
        "ok": np.bool_(True),
        "hist": np.array([1, 2, 3]),
        "role/ceo/loss": {"a": np.float64(-math.inf), 3: (1, 2)},
        "note": "hi",
    })
    rd.append_metrics({"step": 2, "score_mean": 0.75})
    text = rd.metrics_path.read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert text.count("\n") == 2
    rows = rd.read_metrics()
    assert rows[0] == {
        "step": 1, "score_mean": 0.5, "loss": 0.25, "grad_norm": None, "entropy": None,
        "ok": True, "hist": [1, 2, 3], "role/ceo/loss": {"a": None, "3": [1, 2]}, "note": "hi",
    }
    assert isinstance(rows[0]["step"], int)
    assert rows[1] == {"step": 2, "score_mean": 0.75}


def test_read_skips_unterminated_last_line_but_not_middle(tmp_path):
    rd = RunDir.create(tmp_path, {})
    rd.append_metrics({"step": 0})
    with open(rd.metrics_path, "a") as f:
        f.write('{"step": 1, "sco')  # crash mid-write
    assert rd.read_metrics() == [{"step": 0}]
    with open(rd.metrics_path, "a") as f:
        f.write("\n")
    with pytest.raises(ValueError, match="metrics.jsonl:2"):
        rd.read_metrics()


def test_truncate_metrics(tmp_path):
    rd = RunDir.create(tmp_path, {})
    for s in range(6):
        rd.append_metrics({"step": s, "score_mean": s / 10})
    rd.truncate_metrics(before_step=3)
    assert [r["step"] for r in rd.read_metrics()] == [0, 1, 2]
    for s in range(3, 6):
        rd.append_metrics({"step": s, "score_mean": s / 10})
    straight = "".join(json.dumps({"step": s, "score_mean": s / 10}) + "\n" for s in range(6))
    assert rd.metrics_path.read_text() == straight
    RunDir(tmp_path / "missing").truncate_metrics(3)  # no file: no-op


def test_write_samples(tmp_path):
    rd = RunDir.create(tmp_path, {})
    samples = [{"turns": [{"role": "ceo", "t": 0.0, "text": "hi"}]}, {"turns": []}]
    p = rd.write_samples(7, samples)
    assert p == rd.samples_dir / "step_0007.jsonl"
    assert read_jsonl(p) == samples
    rd.write_samples(7, samples[:1])  # rewrite on resume replaces
    assert read_jsonl(p) == samples[:1]


# ------------------------------------------------------------------ TrainProgress


def test_progress_disabled_prints_plain_lines(capsys):
    with TrainProgress(total_steps=3, enabled=False) as prog:
        prog.log("starting")
        prog.update(1, {"score_mean": 0.51234, "time_limit": 12, "loss": float("nan")})
        prog.update(2, {"score_mean": 0.6, "alerts": "amplification: expert [x]"})
        prog.update(3, {})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "starting"
    assert len(out) == 4
    assert out[1].startswith("step 1/3 | elapsed 0:00:00 eta ")
    assert "score 0.5123" in out[1] and "time limit 12" in out[1] and "loss -" in out[1]
    assert "team -" in out[1] and "msgs -" in out[1] and "tok/s -" in out[1]
    assert out[2].endswith("alerts: amplification: expert [x]")
    assert out[3].startswith("step 3/3")


def test_progress_every_n_steps_always_prints_last(capsys):
    with TrainProgress(total_steps=5, enabled=False, every=2) as prog:
        for s in range(1, 6):
            prog.update(s, {"score_mean": s})
    out = capsys.readouterr().out.splitlines()
    assert [line.split(" |")[0] for line in out] == ["step 2/5", "step 4/5", "step 5/5"]


def test_progress_not_a_tty_falls_back_to_plain_even_when_enabled():
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False)
    with TrainProgress(total_steps=2, console=console) as prog:
        assert not prog.live_mode
        prog.update(1, {"tokens_per_s": 1234.5})
    assert "tok/s 1234" in buf.getvalue()


def test_progress_live_mode_renders(tmp_path):
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=120)
    with TrainProgress(total_steps=4, console=console, start_step=1) as prog:
        assert prog.live_mode
        prog.update(2, {"score_mean": 0.5, "team_size_mean": 2.25, "alerts": "cliff"})
        prog.log("a message")
    text = buf.getvalue()
    assert "a message" in text and "2.25" in text and "cliff" in text and "2/4" in text


@pytest.mark.parametrize("v,s", [(None, "-"), (math.nan, "-"), (3, "3"), (2.0, "2"),
                                 (0.123456, "0.1235"), ("x", "x"), (np.float32(1.5), "1.5")])
def test_format_value(v, s):
    assert format_value(v) == s


def test_create_clears_only_swarmrls_leftovers_of_an_aborted_start(tmp_path):
    # No config.yaml: not a run, so a fresh start may reuse the directory.
    (tmp_path / "metrics.jsonl").write_text('{"step": 0}\n')
    for d, names in (("samples", ["step_0000.jsonl", "mine.txt"]), ("checkpoints", ["step_3"]),
                     ("plots", ["score.png", "notes.md"])):
        (tmp_path / d).mkdir()
        for n in names:
            (tmp_path / d / n).write_text("x")
    (tmp_path / ".config.yaml.tmp_1").write_text("x")  # pid 1 is alive: someone else's
    rd = RunDir.create(tmp_path, {"a": 1}, before_config=lambda r: (r.path / "seen").write_text(
        str(r.config_path.exists())))
    assert (tmp_path / "seen").read_text() == "False"  # config.yaml comes after before_config
    assert rd.read_metrics() == []
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [
        ".config.yaml.tmp_1", "config.yaml", "mine.txt", "notes.md", "seen"]
    assert not (tmp_path / "checkpoints").exists()


def test_a_failed_before_config_leaves_no_config(tmp_path):
    def fail(rd):
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        RunDir.create(tmp_path / "run", {"a": 1}, before_config=fail)
    assert not (tmp_path / "run" / "config.yaml").exists()
    with pytest.raises(FileNotFoundError, match="train --out"):
        RunDir.open_for_resume(tmp_path / "run")


def test_overwrite_removes_report_and_logger_outputs_but_not_foreign_files(tmp_path):
    rd = RunDir.create(tmp_path / "run", {"a": 1})
    (rd.path / "report.html").write_text("old")
    (rd.path / "tensorboard").mkdir()
    (rd.path / "tensorboard" / "events.out.tfevents.1.host.1.0").write_text("old")
    (rd.path / "tensorboard" / "notes.txt").write_text("mine")
    (rd.path / "wandb" / "offline-run-x").mkdir(parents=True)
    (rd.path / "wandb" / "wandb_run_id").write_text("abc")
    rd.append_environment({"step": 0})
    RunDir.create(rd.path, {"a": 2}, overwrite=True)
    assert rd.read_environment() == []  # the old run's machines are not the new one's
    assert not (rd.path / "report.html").exists() and not (rd.path / "wandb").exists()
    assert [p.name for p in (rd.path / "tensorboard").iterdir()] == ["notes.txt"]


def test_wall_clock_keys_are_the_timings_and_the_perf_metrics():
    from swarmrl.runs.rundir import wall_clock
    assert all(wall_clock(k) for k in ("step_s", "rollout_s", "tokens_per_s", "eval_s", "perf/mfu_update"))
    assert not any(wall_clock(k) for k in ("score_mean", "loss", "role/ceo/ratio_mean", "time_limit", "perfect"))
