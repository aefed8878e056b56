"""Where `train` writes a run: an --out that is a symbolic link, even one whose target does not
exist yet, trains into the target (mkdir on a dangling link fails with "File exists")."""

from __future__ import annotations

from pathlib import Path

from swarmrl.config import load_config
from swarmrl.policy.model import build_tiny_policy, save_policy
from swarmrl.rl.loop import train

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny_test.yaml"


def test_a_run_through_a_dangling_link_lands_in_its_target(tmp_path):
    cfg = load_config(TINY, ["rl.steps=1"])
    save_policy(build_tiny_policy(cfg.model), tmp_path / "init")
    target = tmp_path / "elsewhere" / "run"
    link = tmp_path / "run"
    link.symlink_to(target)  # dangling: nothing at the target yet
    run = train(cfg, link, init_policy=tmp_path / "init", log=lambda *_: None)
    assert run.path == target and (target / "config.yaml").is_file() and (target / "final").is_dir()
    assert link.is_symlink() and (link / "final").is_dir()  # the link now leads to the run
