"""Typed config: unknown keys and bad values are errors that name the key; presets load."""

from __future__ import annotations

from pathlib import Path

import pytest

from swarmrl.config import Config, ConfigError, apply_overrides, load_config

CONFIGS = Path(__file__).resolve().parents[1] / "src" / "swarmrl" / "configs"


def test_defaults_load_without_a_file():
    cfg = load_config(None, [])
    assert cfg == Config()
    assert cfg.rl.steps == 40 and cfg.workflow.max_experts == 8


def test_unknown_override_key_names_it_and_suggests_closest():
    with pytest.raises(ConfigError) as e:
        load_config(None, ["rl.step=3"])
    msg = str(e.value)
    assert "'rl.step'" in msg
    assert "did you mean 'rl.steps'" in msg


def test_unknown_yaml_section_suggests_closest(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("taks:\n  name: arith\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    msg = str(e.value)
    assert "'taks'" in msg
    assert "did you mean 'task'" in msg


def test_unknown_nested_yaml_key_names_full_path(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("rl:\n  problem_per_step: 3\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert "'rl.problem_per_step'" in str(e.value)
    assert "did you mean 'problems_per_step'" in str(e.value)


def test_override_without_equals_is_an_error():
    with pytest.raises(ConfigError, match="not key=value"):
        load_config(None, ["rl.steps"])


@pytest.mark.parametrize("override, fragment", [
    ("rl.lr=abc", "rl.lr: expected a number, got 'abc'"),
    ("rl.steps=2.5", "rl.steps: expected an integer, got 2.5"),
    ("rl.steps=true", "rl.steps: expected an integer"),  # bools are not ints here
    ("run.progress=1", "run.progress: expected true/false"),
    ("policy.sharing=both", "policy.sharing: 'both' is not one of ['shared', 'isolated', 'isolated_full']"),
    ("task.name=true", "task.name: expected a string"),
    ("model.name_or_path=1.5", "model.name_or_path: expected a string"),
    ("rl.smaller_caps=[0]", "rl.smaller_caps: expected a string"),
])
def test_bad_type_names_the_key(override, fragment):
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    assert fragment in str(e.value)


@pytest.mark.parametrize("override, fragment", [
    ("time_limit.start=0", "time_limit.start must be > 0"),
    ("workflow.max_experts=9", "workflow.max_experts must be in [0, 8]"),
    ("workflow.max_experts=-1", "workflow.max_experts must be in [0, 8]"),
    ("rl.rollouts_per_problem=1", "rl.rollouts_per_problem must be >= 2"),
    ("task.dependency_rate=1.5", "task.dependency_rate must be in [0, 1]"),
    ("task.max_chain=-1", "task.max_chain must be >= 0"),
    ("task.board_demo_rate=-0.1", "task.board_demo_rate must be in [0, 1]"),
    ("model.num_kv_heads=3", "model.num_heads must be a multiple of model.num_kv_heads"),
    ("eval.team_size=70", "eval.team_size must be in"),
    ("eval.max_team_size=5", "eval.max_team_size must be >= workflow.max_experts + 1 = 9"),
    ("task.items_per_problem=703", "task.items_per_problem must be in [1, 702]"),
    ("task.items_per_problem=0", "task.items_per_problem must be in [1, 702]"),
    ("workflow.manager_hires=-1", "workflow.manager_hires must be >= 0"),
    ("workflow.span=-1", "workflow.span must be >= 0"),
])
def test_bad_value_is_rejected(override, fragment):
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    assert fragment in str(e.value)


def test_manager_hires_needs_the_org():
    assert load_config(None, ["workflow.manager_hires=4"]).workflow.manager_hires == 4
    with pytest.raises(ConfigError, match="workflow.manager_hires=4 needs workflow.name=org"):
        load_config(None, ["workflow.name=voting", "workflow.manager_hires=4"])


def test_span_needs_the_org_and_excludes_manager_hires():
    assert load_config(None, ["workflow.span=8"]).workflow.span == 8
    with pytest.raises(ConfigError, match="workflow.span=8 needs workflow.name=org"):
        load_config(None, ["workflow.name=voting", "workflow.span=8"])
    with pytest.raises(ConfigError, match="two hierarchies: set one"):
        load_config(None, ["workflow.span=8", "workflow.manager_hires=2"])


def test_team_size_bound_follows_the_evaluation_cap():
    # The evaluation cap is its own setting: 3 agents are fine with 1 trained expert, not past the cap.
    assert load_config(None, ["workflow.max_experts=1", "eval.team_size=3"]).eval.team_size == 3
    with pytest.raises(ConfigError, match="eval.team_size"):
        load_config(None, ["workflow.max_experts=1", "eval.max_team_size=2", "eval.team_size=3"])


def test_overrides_parse_yaml_scalars():
    cfg = load_config(None, ["rl.lr=1.0e-3", "rl.steps=7", "run.progress=false", "time_limit.start=2",
                             "model.name_or_path=", "workflow.name=single", "rl.kl_coef=0.5"])
    assert cfg.rl.lr == 1e-3 and isinstance(cfg.rl.lr, float)
    assert cfg.rl.steps == 7 and isinstance(cfg.rl.steps, int)
    assert cfg.run.progress is False
    # an int is accepted for a float field and stored as a float
    assert cfg.time_limit.start == 2.0 and isinstance(cfg.time_limit.start, float)
    assert cfg.model.name_or_path == ""
    assert cfg.workflow.name == "single"
    assert cfg.rl.kl_coef == 0.5


@pytest.mark.parametrize("source", ["override", "yaml"])
def test_exponent_without_dot_is_a_number(source, tmp_path):
    if source == "override":
        cfg = load_config(None, ["rl.lr=1e-3"])
    else:
        p = tmp_path / "c.yaml"
        p.write_text("rl:\n  lr: 1e-3\n")
        cfg = load_config(p)
    assert cfg.rl.lr == 1e-3


def test_override_value_may_contain_equals_sign():
    cfg = load_config(None, ["model.name_or_path=a=b"])
    assert cfg.model.name_or_path == "a=b"


def test_overrides_win_over_yaml_and_keep_the_rest(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("rl:\n  steps: 5\n  lr: 0.01\nseed: 3\n")
    cfg = load_config(p, ["rl.steps=9"])
    assert (cfg.rl.steps, cfg.rl.lr, cfg.seed) == (9, 0.01, 3)
    assert cfg.rl.problems_per_step == Config().rl.problems_per_step


def test_apply_overrides_builds_nested_dicts():
    assert apply_overrides({}, ["rl.steps=3", "seed=4"]) == {"rl": {"steps": 3}, "seed": 4}


def test_section_that_is_not_a_mapping(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("rl: 3\n")
    with pytest.raises(ConfigError, match="rl"):
        load_config(p)


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_preset_loads(path):
    cfg = load_config(path)
    assert isinstance(cfg, Config)


def test_presets_exist_and_demo_default_matches_its_comment():
    names = {p.name for p in CONFIGS.glob("*.yaml")}
    assert {"rlcr_arith.yaml", "tiny_test.yaml"} <= names
    cfg = load_config(CONFIGS / "rlcr_arith.yaml")
    assert cfg.workflow.max_experts == 8
    assert (cfg.time_limit.start, cfg.time_limit.end) == (4.5, 5.5)  # "from 4.5 s to 5.5 s"
    assert cfg.task.items_per_problem == 12 and cfg.task.board_demo_rate == 0.5
    tiny = load_config(CONFIGS / "tiny_test.yaml")
    assert tiny.rl.steps == 2 and tiny.model.hidden_size == 32


def test_to_dict_round_trips():
    from swarmrl.config import config_from_dict
    cfg = load_config(None, ["rl.steps=3", "clock.message_latency_s=0.2"])
    assert config_from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize("override, fragment", [
    ("run.threads=0", "run.threads must be >= 1 (torch needs at least one thread), got 0"),
    ("run.checkpoint_every=-1", "run.checkpoint_every must be >= 0 (0 = only the last step), got -1"),
    ("run.samples_per_step=-1", "run.samples_per_step must be >= 0 (0 = none), got -1"),
    ("rl.steps=0", "rl.steps must be >= 1"),
    ("rl.grad_clip=0", "rl.grad_clip must be > 0"),
    ("rl.kl_coef=-0.1", "rl.kl_coef must be >= 0"),
    ("rl.weight_decay=-1", "rl.weight_decay must be >= 0"),
    ("model.hidden_size=0", "model.hidden_size must be >= 1, got 0"),
    ("model.num_layers=0", "model.num_layers must be >= 1, got 0"),
    ("model.num_heads=0", "model.num_heads must be >= 1, got 0"),
    ("model.num_kv_heads=0", "model.num_kv_heads must be >= 1, got 0"),
    ("model.intermediate_size=0", "model.intermediate_size must be >= 1, got 0"),
    ("model.hidden_size=4", "the head dimension, 1) must be even and >= 2"),
    ("model.max_context_tokens=16", "model.max_context_tokens must be >= sampler.max_new_tokens_per_turn + 128 (= 192"),
    ("sampler.max_turns_per_agent=0", "sampler.max_turns_per_agent must be >= 1"),
    ("warmstart.batch_sequences=0", "warmstart.batch_sequences must be >= 1, got 0"),
    ("warmstart.epochs=0", "warmstart.epochs must be >= 1, got 0"),
    ("warmstart.demos_per_strategy=0", "warmstart.demos_per_strategy must be >= 1, got 0"),
    ("warmstart.lr=0", "warmstart.lr must be > 0"),
    ("warmstart.seed=-1", "warmstart.seed must be >= 0"),
    ("warmstart.threads=-1", "warmstart.threads must be >= 0"),
    ("seed=-1", "seed must be >= 0 (numpy seeds are non-negative), got -1"),
    ("task.eval_seed=-1", "task.eval_seed must be >= 0"),
    ("policy.lora_alpha=0", "policy.lora_alpha must be > 0"),
    ("detectors.patience=0", "detectors.patience must be >= 1"),
    ("detectors.amplification_ratio=0", "detectors.amplification_ratio must be > 0"),
    ("eval.time_limit=-1", "eval.time_limit must be >= 0"),
    ("time_limit.start=7", "time_limit.start (7) must be <= time_limit.end (6)"),
    ("task.dataset=humaneval", "task.dataset='humaneval' is for task.name=math or code"),
    ("rl.lr=.inf", "rl.lr: expected a finite number, got inf"),
    ("rl.lr={", "rl.lr: cannot parse the value '{'"),
])
def test_meaningless_numbers_are_rejected_naming_key_and_value(override, fragment):
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    assert fragment in str(e.value)


@pytest.mark.parametrize("overrides, fragment", [
    (["task.name=math", "task.dataset=humaneval"], "task.dataset=humaneval is a code dataset"),
    (["task.name=code", "task.dataset=champ"], "task.dataset=champ is a math dataset"),
])
def test_builtin_dataset_of_the_other_task(overrides, fragment):
    with pytest.raises(ConfigError, match=fragment):
        load_config(None, overrides)


def test_boundary_values_that_mean_something_are_accepted():
    cfg = load_config(None, ["rl.steps=1", "run.checkpoint_every=0", "run.samples_per_step=0",
                             "model.max_context_tokens=192", "time_limit.start=7", "time_limit.schedule=constant"])
    assert (cfg.rl.steps, cfg.run.checkpoint_every, cfg.model.max_context_tokens) == (1, 0, 192)
    # the head-dimension rule concerns the tiny model only: a named model brings its own sizes
    assert load_config(None, ["model.name_or_path=some/model", "model.hidden_size=6"]).model.hidden_size == 6


@pytest.mark.parametrize("content, fragment", [
    (b"rl: {steps: 2\n", "bad.yaml: invalid YAML at line 2, column 1"),
    (b"- a\n- b\n", "bad.yaml: the top level must be a mapping, got a list"),
    (b"just text\n", "bad.yaml: the top level must be a mapping, got a str"),
    (b"\xff\xfe rl: 1\n", "bad.yaml: not a UTF-8 text file (byte 0"),
])
def test_unreadable_yaml_names_the_file(content, fragment, tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_bytes(content)
    with pytest.raises(ConfigError) as e:
        load_config(p, ["rl.steps=3"])
    assert fragment in str(e.value)


def test_empty_yaml_is_the_defaults_and_a_directory_is_not_a_config(tmp_path):
    (tmp_path / "empty.yaml").write_text("# nothing\n")
    assert load_config(tmp_path / "empty.yaml") == Config()
    with pytest.raises(ConfigError, match=f"{tmp_path}: not a file"):
        load_config(tmp_path)


def test_override_into_a_section_that_is_not_a_mapping():
    with pytest.raises(ConfigError, match=r"rl: expected a mapping, got 3 \(cannot set 'rl.steps'\)"):
        apply_overrides({"rl": 3}, ["rl.steps=2"])


@pytest.mark.parametrize("override", ["task.name=my_pkg.tasks:SortTask", "workflow.name=flows.py:Pipeline",
                                      "rl.advantage=my_pkg.adv:spread", "rl.loss=losses.py:my_loss",
                                      "rl.aggregation=my_pkg.agg:per_turn"])
def test_extension_names_are_strings_resolved_later(override):
    """A plugin spec (or an unknown name) loads: the registries resolve it before training, so
    reading a config imports no task, workflow or RL code."""
    key, value = override.split("=", 1)
    section, field = key.split(".")
    if ".py:" in value:  # a file spec is saved absolute, against the working directory
        value = f"{Path.cwd().resolve()}/{value}"
    assert getattr(getattr(load_config(None, [override]), section), field) == value


def test_clock_mode_is_gone():
    with pytest.raises(ConfigError, match="unknown config key 'clock.mode'"):
        load_config(None, ["clock.mode=simulated"])


def test_config_modules_form_no_import_cycle():
    """config_schema imports neither config module; config_load imports config_schema only."""
    import ast

    import swarmrl.config_load
    import swarmrl.config_schema

    def imports(mod) -> set[str]:
        tree = ast.parse(Path(mod.__file__).read_text())
        return ({n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
                | {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names})

    assert not {"swarmrl.config", "swarmrl.config_load"} & imports(swarmrl.config_schema)
    assert "swarmrl.config" not in imports(swarmrl.config_load)


def test_facade_reexports_loading_and_suggest():
    from swarmrl import config, config_load
    for name in ("load_config", "apply_overrides", "config_from_dict", "validate", "read_yaml",
                 "resolve_config", "suggest", "REPO_CONFIGS", "DEMO_CONFIG"):
        assert getattr(config, name) is getattr(config_load, name)
    assert config.suggest("rl.step", ["rl.steps", "seed"]) == " (did you mean 'rl.steps'?)"
    assert config.suggest("zzz", ["rl.steps"]) == ""


def test_resolve_config_finds_presets_and_paths(tmp_path):
    from swarmrl.config_load import DEMO_CONFIG, resolve_config
    assert resolve_config(None) is None
    assert resolve_config(DEMO_CONFIG) == CONFIGS / DEMO_CONFIG
    assert resolve_config("tiny_test") == CONFIGS / "tiny_test.yaml"
    p = tmp_path / "mine.yaml"
    p.write_text("seed: 1\n")
    assert resolve_config(str(p)) == p
    with pytest.raises(ConfigError, match="config not found: nope"):
        resolve_config("nope")


def test_a_saved_config_with_a_retired_key_still_loads_and_a_changed_one_does_not():
    """Run directories written before `clock.mode` was removed resume and evaluate; a value
    that would have meant something else is still an error."""
    from swarmrl.config import Config, ConfigError, config_from_dict
    old = Config().to_dict()
    old["clock"]["mode"] = "simulated"
    assert config_from_dict(old) == Config()
    old["clock"]["mode"] = "wall"
    with pytest.raises(ConfigError, match="unknown config key 'clock.mode'"):
        config_from_dict(old)


def test_file_plugin_specs_are_saved_absolute(tmp_path, monkeypatch):
    """`task.name=examples/x.py:T` typed in one directory still names the file when the saved
    config is read from another; module specs and absolute paths stay as written."""
    from swarmrl.config import load_config
    monkeypatch.chdir(tmp_path)
    cfg = load_config(None, ["task.name=plugins/x.py:T", "rl.advantage=my_pkg.adv:fn", "workflow.name=/abs/w.py:W"])
    assert cfg.task.name == f"{tmp_path.resolve()}/plugins/x.py:T"
    assert cfg.rl.advantage == "my_pkg.adv:fn" and cfg.workflow.name == "/abs/w.py:W"


def test_an_integer_is_read_as_its_digits_where_a_string_is_expected():
    cfg = load_config(None, ["rl.smaller_caps=0", "rl.smaller_caps_fraction=0.25"])
    assert cfg.rl.smaller_caps == "0"  # one cap; `0,1` already parsed as a string
    assert load_config(None, ["rl.smaller_caps=0,1"]).rl.smaller_caps == "0,1"


def test_full_weights_in_bfloat16_at_a_step_that_rounds_away_are_refused():
    import torch
    w = torch.tensor(0.02, dtype=torch.bfloat16)  # the reason, by hand: bfloat16's spacing at 0.02 is 2^-13
    assert (w - 1e-6 == w) and (w - 2.0 ** -14 * 1.01 != w)
    with pytest.raises(ConfigError, match=r"model\.dtype=bfloat16 with policy\.sharing=shared .* rl\.lr \(1e-06\)"):
        load_config(None, ["model.dtype=bfloat16", "rl.lr=1e-6"])
    with pytest.raises(ConfigError, match="policy.sharing=isolated_full"):
        load_config(None, ["model.dtype=float16", "rl.lr=1e-6", "policy.sharing=isolated_full"])
    assert load_config(None, ["model.dtype=bfloat16", "rl.lr=1e-4"]).model.dtype == "bfloat16"  # steps that land
    assert load_config(None, ["model.dtype=bfloat16", "rl.lr=1e-6", "policy.sharing=isolated"]).rl.lr == 1e-6
    assert load_config(None, ["rl.lr=1e-6"]).model.dtype == "float32"
