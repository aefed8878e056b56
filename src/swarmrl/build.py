"""The composition root: every part of a run is built from its config here, and closed here.

Nothing else in swarmrl constructs a task, scenario, runtime, policy set, actor, backend or
updater from a config: the trainer, evaluation, the warm start, scaling and the Ray workers
all call these functions, so a plugin named in the config (`task.name=my_file.py:MyTask`)
reaches every one of them, and the saved `config.yaml` is all a resume or an eval needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from swarmrl.collective.clock import LatencyModel
from swarmrl.collective.protocol import make_protocol
from swarmrl.collective.runtime import Runtime, RuntimeLimits
from swarmrl.collective.state import Rollout
from swarmrl.config import Config, ConfigError
from swarmrl.diagnostics.detectors import Detectors
from swarmrl.distributed import make_backend
from swarmrl.distributed.torchrun import open_learner
from swarmrl.policy.actor import LLMActor
from swarmrl.policy.device import model_device, place_model, resolve_device, rollout_device
from swarmrl.policy.model import Policy
from swarmrl.policy import sharing
from swarmrl.policy.sharing import PolicySet
from swarmrl.rl.advantages import get_advantage
from swarmrl.rl.anchor import DemoAnchor
from swarmrl.rl.aggregation import AGGREGATIONS
from swarmrl.rl.losses import make_loss
from swarmrl.rl.update import Updater
from swarmrl.scenarios import make_scenario
from swarmrl.seeds import rng_for
from swarmrl.tasks import TASKS, close_task, task_from_config


def check_plugins(cfg: Config) -> None:
    """Resolve every registry name of the config (task, scenario, estimator, loss, aggregation)
    and build the scenario, so an unknown name, a bad plugin spec, a plugin missing a method
    of its protocol, or a role graph whose roles cannot reach its submitter fails before any
    model is built or trained; so does a device or engine this machine lacks (`check_hardware`).
    Raises PluginError / ConfigError naming the key."""
    TASKS.get(cfg.task.name)
    scenario = make_scenario(cfg)
    if cfg.rl.smaller_caps_fraction and not (scenario.hires and scenario.team_cap(None) >= 1):
        raise ConfigError(f"rl.smaller_caps_fraction needs a scenario that hires (workflow.name=org) with "
                          f"max_experts >= 1: only a CEO who hires has a cap (workflow.name={cfg.workflow.name}); "
                          "set rl.smaller_caps_fraction=0 (the demo preset rlcr_arith.yaml turns it on)")
    # With the fraction at 0, `rl.smaller_caps` is inert: a preset that sets both is turned off
    # by the fraction alone.
    if cfg.rl.smaller_caps_fraction:
        smaller_caps(cfg)
    step_spans(cfg, 0)
    frozen_roles(cfg)
    check_groups(cfg, scenario)
    get_advantage(cfg.rl.advantage)
    make_loss(cfg.rl)
    AGGREGATIONS.get(cfg.rl.aggregation)
    check_hardware(cfg)


def check_hardware(cfg: Config) -> None:
    """The machine can run the config: `model.device` names a device that exists here, and
    `sampler.engine=vllm` has its GPU and package (policy/vllm_engine.py `check_engine`). A
    ConfigError naming the key, before any model is loaded."""
    resolve_device(cfg.model.device)
    from swarmrl.policy import vllm_engine  # lazy: the module attribute, so a test may stand in for it
    vllm_engine.check_engine(cfg)


def place_policy(cfg: Config, policy: Policy | PolicySet, role: str = "learner") -> torch.device:
    """Put every model of `policy` (a Policy, or each model of a PolicySet) on `model.device`;
    returns the device. `role`: `learner` (also turns on `model.gradient_checkpointing`), `eval`
    (the device only), or `rollout` (a Ray worker's replica: the CPU where this process has no
    GPU, policy/device.py `rollout_device`). Every tensor the sampler and the learner make
    follows its model's device, so this is the one place a run decides where it computes."""
    device = rollout_device(cfg.model.device) if role == "rollout" else resolve_device(cfg.model.device)
    models = policy.modules() if isinstance(policy, PolicySet) else [policy.model]
    for m in models:
        if model_device(m) != device or role == "learner":
            place_model(m, device, gradient_checkpointing=role == "learner" and cfg.model.gradient_checkpointing)
    return device


def make_runtime(cfg: Config, tokenizer, task=None) -> tuple[Runtime, object]:
    """The runtime with the run's scenario as its default and the run's protocol (`model.protocol`:
    compact or the chat template), and its task (built unless given)."""
    task = task if task is not None else task_from_config(cfg)
    limits = RuntimeLimits(max_new_tokens_per_turn=cfg.sampler.max_new_tokens_per_turn,
                           max_turns_per_agent=cfg.sampler.max_turns_per_agent,
                           max_context_tokens=cfg.model.max_context_tokens,
                           max_hires_per_rollout=cfg.workflow.max_hires_per_rollout)
    return Runtime(task, tokenizer, LatencyModel.from_config(cfg.clock), limits, scenario=make_scenario(cfg),
                   protocol=make_protocol(cfg.model, tokenizer)), task


def max_experts_for(cfg: Config) -> int:
    """The expert cap of the run's rollouts (0 where the scenario does not hire)."""
    return make_scenario(cfg).team_cap(None)


def make_policy_set(cfg: Config, policy: Policy) -> PolicySet:
    """One policy slot per role type of the scenario (or one shared slot); `policy.frozen_roles`
    marks slots that never train (and `policy.frozen_init` gives them other weights).
    LoRA A matrices are drawn from torch's global RNG: seeded here (without disturbing the
    caller's stream) so that the same config gives the same adapters in any process."""
    with torch.random.fork_rng():
        torch.manual_seed(cfg.seed)
        policies = sharing.make_policy_set(policy, cfg.policy.sharing, make_scenario(cfg).role_types(),
                                           lora_rank=cfg.policy.lora_rank, lora_alpha=cfg.policy.lora_alpha,
                                           lora_targets=cfg.policy.lora_targets, temperature=cfg.sampler.temperature,
                                           batched_adapters=cfg.sampler.batched_adapters)
    policies.frozen = frozenset(frozen_roles(cfg))
    if cfg.policy.frozen_init:
        from swarmrl.policy.model import load_policy
        other = load_policy(cfg.policy.frozen_init, cfg.model.dtype).model.state_dict()
        for slot in policies.frozen:
            sharing.load_weights(policies.policies[slot].model, other, f"policy.frozen_init={cfg.policy.frozen_init}")
    return policies


def check_groups(cfg: Config, scenario) -> None:
    """`workflow.groups` > 1 needs a task with a `variant` hook and at least as many agents as groups."""
    g = cfg.workflow.groups
    if g == 1:
        return
    if not hasattr(TASKS.get(cfg.task.name), "variant"):
        raise ConfigError(f"workflow.groups={g}: task {cfg.task.name!r} has no `variant(problem, k)` hook, so "
                          "its groups would all see the same problem; add one or set workflow.groups=1")
    if g > scenario.max_team_size():
        raise ConfigError(f"workflow.groups={g} is more than the {scenario.max_team_size()} agents a "
                          f"{cfg.workflow.name} team can have: some groups would stay empty")


def frozen_roles(cfg: Config) -> list[str]:
    """`policy.frozen_roles`, checked against the scenario and the sharing mode (ConfigError)."""
    roles = [r.strip() for r in cfg.policy.frozen_roles.split(",") if r.strip()]
    if cfg.policy.frozen_init and not roles:
        raise ConfigError("policy.frozen_init is set but policy.frozen_roles is empty: name the roles it plays")
    if not roles:
        return []
    types = make_scenario(cfg).role_types()
    if unknown := [r for r in roles if r not in types]:
        raise ConfigError(f"policy.frozen_roles: workflow {cfg.workflow.name} has no role {unknown[0]!r} "
                          f"(its roles: {', '.join(types)})")
    if set(roles) >= set(types):
        raise ConfigError(f"policy.frozen_roles={cfg.policy.frozen_roles}: every role would be frozen; nothing trains")
    if cfg.policy.sharing == "shared":
        raise ConfigError("policy.frozen_roles needs a policy per role type (policy.sharing=isolated or "
                          "isolated_full): under shared one set of weights plays every role")
    if cfg.policy.frozen_init and cfg.policy.sharing != "isolated_full":
        raise ConfigError("policy.frozen_init needs policy.sharing=isolated_full (a full model copy per role); "
                          "under isolated a frozen role plays the base model")
    return roles


def rollout_parts(cfg: Config, policy: Policy) -> tuple[Runtime, PolicySet]:
    """What a rollout worker holds (distributed/worker.py): a runtime and a policy set."""
    runtime, _ = make_runtime(cfg, policy.tokenizer)
    place_policy(cfg, policy, role="rollout")
    return runtime, make_policy_set(cfg, policy)


def new_rollouts(runtime: Runtime, problems, per_problem: int, time_limit: float | list[float],
                 caps: list[int] | None = None, spans: list[int] | None = None) -> list[Rollout]:
    """`per_problem` rollouts of each problem (one group each) under the runtime's scenario;
    `time_limit`: one deadline for all, or one per problem; `caps`: the expert cap per problem
    (default: the scenario's); `spans`: the span of control per problem (default: the scenario's)."""
    caps = caps or [None] * len(problems)
    spans = spans or [None] * len(problems)
    limits = time_limit if isinstance(time_limit, list) else [time_limit] * len(problems)
    return [runtime.new_rollout(g * per_problem + j, g, p, limits[g], caps[g], span=spans[g])
            for g, p in enumerate(problems) for j in range(per_problem)]


def step_spans(cfg: Config, step: int) -> list[int] | None:
    """Each problem's span of control at `step`, drawn from `rl.spans` (a function of (seed, step)
    alone, like the problems); None when `rl.spans` is empty: every problem takes `workflow.span`."""
    text = cfg.rl.spans.strip()
    if not text:
        return None
    try:
        spans = [int(s) for s in text.split(",")]
    except ValueError:
        raise ConfigError(f"rl.spans must be comma-separated integers, got {text!r}") from None
    if not cfg.workflow.span or any(s < 1 for s in spans):
        raise ConfigError(f"rl.spans={text!r} needs workflow.span > 0 (got {cfg.workflow.span}) and spans >= 1 "
                          "(0 would be flat: a span at or above the cap is flat already)")
    picks = rng_for("spans", cfg.seed, step).integers(0, len(spans), size=cfg.rl.problems_per_step)
    return [spans[int(i)] for i in picks]


def step_caps(cfg: Config, step: int) -> list[int]:
    """Each problem's cap at `step`: the last round(fraction x problems) get a smaller one,
    drawn from `rl.smaller_caps` (default 0..max_experts-1; a function of (seed, step) alone,
    like the problems)."""
    n, top = cfg.rl.problems_per_step, max_experts_for(cfg)
    k = round(cfg.rl.smaller_caps_fraction * n)
    if k == 0:
        return [top] * n
    choices = smaller_caps(cfg) or list(range(top))
    small = rng_for("caps", cfg.seed, step).integers(0, len(choices), size=k)
    return [top] * (n - k) + [choices[int(i)] for i in small]


def cap_time_limits(cfg: Config, caps: list[int], time_limit: float) -> list[float]:
    """Each problem's curriculum deadline (s) given its cap: `time_limit` scaled by
    ((full cap + 1) / (cap + 1)) ** `rl.smaller_caps_time_exponent` (1: the full team's
    agent-seconds for every group; 0: the same deadline for all)."""
    power = cfg.rl.smaller_caps_time_exponent
    if not (power and cfg.rl.smaller_caps_fraction):
        return [time_limit] * len(caps)
    top = max_experts_for(cfg)
    return [time_limit * ((top + 1) / (c + 1)) ** power for c in caps]


def smaller_caps(cfg: Config) -> list[int]:
    """`rl.smaller_caps` as ints ([] when empty); each must be below the full cap."""
    text = cfg.rl.smaller_caps.strip()
    try:
        caps = [int(c) for c in text.split(",")] if text else []
    except ValueError:
        raise ConfigError(f"rl.smaller_caps must be comma-separated integers, got {text!r}") from None
    top = max_experts_for(cfg)
    bad = [c for c in caps if not 0 <= c < top]
    if bad:
        raise ConfigError(f"rl.smaller_caps {bad} out of range: each cap must be in 0..{top - 1} "
                          f"(below the full cap {top})")
    return caps


@dataclass
class RunParts:
    """Everything a training run holds, built from one config; `close()` releases it all."""

    cfg: Config
    policy: Policy  # the base policy (tokenizer, ids); trainable weights live in `policies`
    runtime: Runtime
    task: object
    backend: object = None
    policies: PolicySet | None = None
    actor: LLMActor | None = None
    updater: Updater | None = None
    detectors: Detectors | None = None
    advantage_fn: object = None
    role_ids: dict[str, int] = field(default_factory=dict)
    learner: object = None  # a sharded learner's process group (distributed/sharding.py); None: one process
    anchor: object = None  # rl/anchor.py DemoAnchor: scripted solo demonstrations in the update (rl.demo_anchor_coef)

    def close(self) -> None:
        """Release what the run holds, on success, error or Ctrl-C: the backend (Ray workers and a
        cluster it started; the vLLM engine it attached), an engine set on the policies directly,
        and the task's sandbox pool. Idempotent. Every part is closed even when one fails; the
        first failure is raised after."""
        first: Exception | None = None
        for part in ("backend", "engine", "task", "learner"):  # the process group last: the others may use it
            try:
                _close_part(self, part)
            except Exception as e:  # the other parts still hold processes / memory: close them too
                first = first or e
        if first is not None:
            raise first


def _close_part(parts: RunParts, part: str) -> None:
    if part == "engine":  # read after the backend's close, which may have closed it already
        engine = getattr(parts.policies, "engine", None)
        if engine is not None:
            parts.policies.engine = None
            engine.close()
    elif part == "task":
        if parts.task is not None:
            close_task(parts.task)
    elif part == "learner":
        if parts.learner is not None:
            parts.learner.close()
    elif parts.backend is not None:  # a backend's close is idempotent
        parts.backend.close()


def build_run(cfg: Config, policy: Policy) -> RunParts:
    """Build a training run's parts. A failure half way releases what was already built (the
    task's sandbox pool, a Ray cluster) before it propagates."""
    check_plugins(cfg)
    runtime, task = make_runtime(cfg, policy.tokenizer)
    parts = RunParts(cfg=cfg, policy=policy, runtime=runtime, task=task)
    try:
        # Where rollouts run; made before adapters wrap the model: Ray workers copy the plain one.
        parts.learner = open_learner(cfg)  # torchrun's process group (learner.strategy ddp | fsdp)
        parts.backend = make_backend(cfg, policy, rollout_parts, parts.learner)
        place_policy(cfg, policy)  # after the backend: Ray workers get the CPU replica
        parts.policies = make_policy_set(cfg, policy)
        if parts.learner is not None:  # fsdp shards the models here, before optimizers hold their parameters
            parts.learner.wrap(parts.policies)
        parts.actor = LLMActor.from_config(cfg.sampler, parts.policies)
        parts.backend.attach(runtime, parts.actor, parts.policies)
        parts.advantage_fn = get_advantage(cfg.rl.advantage)
        parts.updater = Updater(cfg.rl, parts.policies, make_loss(cfg.rl), policy.pad_id, cfg.seed,
                                temperature=cfg.sampler.temperature, sharding=parts.learner)
        parts.updater.mixed_precision = cfg.model.mixed_precision
        parts.detectors = Detectors(cfg.detectors)
        parts.anchor = DemoAnchor(cfg, runtime, task, policy)
        parts.role_ids = {r: i for i, r in enumerate(runtime.scenario.role_types())}
    except BaseException:
        parts.close()
        raise
    return parts


def eval_problems(cfg: Config, task, n: int):
    """The held-out problems every evaluation uses (never seen in training)."""
    return task.sample(rng_for("eval_problems", cfg.task.eval_seed), n)


__all__ = ["RunParts", "build_run", "check_hardware", "check_plugins", "eval_problems", "frozen_roles", "make_policy_set", "make_runtime",
           "max_experts_for", "new_rollouts", "place_policy", "rollout_parts", "step_caps"]
