"""Value checks that types cannot express: lower bounds, ranges, and checks across keys.

`validate` raises the first failure as a ConfigError naming the key; config_load.py calls it
on every config it builds.
"""

from __future__ import annotations

from typing import Any

from swarmrl.config_schema import Config, ConfigError


def _value(cfg: Config, key: str) -> Any:
    node: Any = cfg
    for part in key.split("."):
        node = getattr(node, part)
    return node


# (key, bound, strict): the value must be > bound (strict) or >= bound, else an error naming
# the key and its value. Zero counts and sizes crash deep inside torch or numpy, or silently
# run nothing (`rl.steps=0` trains no step and writes no metrics), so they stop here.
_LOWER_BOUNDS: list[tuple[str, float, bool, str]] = [
    ("seed", 0, False, "numpy seeds are non-negative"),
    ("task.terms_per_item", 2, False, ""),
    ("task.eval_seed", 0, False, "numpy seeds are non-negative"),
    ("workflow.generators", 1, False, "a multiplicity"),
    ("workflow.workers", 1, False, "a multiplicity"),
    ("workflow.groups", 1, False, "1 = no groups"),
    ("policy.lora_rank", 1, False, ""),
    ("policy.lora_alpha", 0, True, "0 would switch the adapters off"),
    ("model.hidden_size", 1, False, ""),
    ("model.num_layers", 1, False, ""),
    ("model.num_heads", 1, False, ""),
    ("model.num_kv_heads", 1, False, ""),
    ("model.intermediate_size", 1, False, ""),
    ("sampler.temperature", 0, True, ""),
    ("sampler.max_new_tokens_per_turn", 1, False, ""),
    ("sampler.max_turns_per_agent", 1, False, "an agent with no turn does nothing"),
    ("sampler.kv_cache_mb", 0, False, "0 = no cap"),
    ("clock.call_overhead_s", 0, False, ""),
    ("clock.prefill_tokens_per_s", 0, True, ""),
    ("clock.decode_tokens_per_s", 0, True, ""),
    ("clock.message_latency_s", 0, False, ""),
    ("time_limit.start", 0, True, "seconds"),
    ("time_limit.end", 0, True, "seconds"),
    ("time_limit.ramp_steps", 0, False, ""),
    ("shaping.penalty_per_s", 0, False, ""),
    ("shaping.safety_cap_s", 0, True, "seconds"),
    ("shaping.wrong_cost", 0, False, "0 = off: a wrong answer only forgoes its item"),
    ("shaping.instantiation_coef", 0, False, "0 = off"),
    ("shaping.instantiation_anneal_start", 0, False, "a step"),
    ("shaping.instantiation_anneal_end", 0, False, "0 = never annealed"),
    ("shaping.finish_coef", 0, False, "0 = off"),
    ("shaping.finish_anneal_start", 0, False, "a step"),
    ("shaping.finish_anneal_end", 0, False, "0 = never annealed"),
    ("rl.steps", 1, False, "0 steps would train nothing and write an empty run"),
    ("rl.problems_per_step", 1, False, ""),
    ("rl.rollouts_per_problem", 2, False, "a group needs a baseline"),
    ("rl.clip_eps", 0, True, ""),
    ("rl.kl_coef", 0, False, "0 = off"),
    ("rl.lr", 0, True, ""),
    ("rl.weight_decay", 0, False, ""),
    ("rl.grad_clip", 0, True, "0 would zero every gradient"),
    ("rl.micro_batch_tokens", 64, False, ""),
    ("rl.logprob_chunk_tokens", 0, False, "0 = full logits, no chunking"),
    ("rl.minibatches_per_step", 1, False, ""),
    ("rl.role_grad_interval", 0, False, "0 = never"),
    ("warmstart.demos_per_strategy", 1, False, ""),
    ("warmstart.epochs", 1, False, ""),
    ("warmstart.learned_loss", 0, False, ""),
    ("warmstart.extra_epochs", 0, False, ""),
    ("warmstart.lr", 0, True, ""),
    ("warmstart.batch_sequences", 1, False, ""),
    ("warmstart.length_group_batches", 0, False, ""),
    ("warmstart.seed", 0, False, "numpy seeds are non-negative"),
    ("warmstart.threads", 0, False, "0 = run.threads shared over warmstart.processes"),
    ("run.checkpoint_every", 0, False, "0 = only the last step"),
    ("run.samples_per_step", 0, False, "0 = none"),
    ("run.threads", 1, False, "torch needs at least one thread"),
    ("run.keep_checkpoints", 0, False, "0 = keep all"),
    ("eval.problems", 1, False, ""),
    ("eval.time_limit", 0, False, "0 = time_limit.end"),
    ("eval.val_interval", 0, False, "0 = never"),
    ("eval.val_problems", 1, False, ""),
    ("detectors.amplification_ratio", 0, True, ""),
    ("detectors.patience", 1, False, ""),
    ("detectors.capture_min_shift", 0, False, ""),
    ("detectors.cliff_drop", 0, False, ""),
]


# The runtime ends an agent whose context cannot take another turn plus a reserve (64 tokens,
# collective/runtime.py); below a header's worth more, every agent is cut after one turn.
CONTEXT_MARGIN_TOKENS = 128


def validate(cfg: Config) -> Config:
    """Value checks that types cannot express; the first failure is a ConfigError naming the key."""
    # Group by group: the cross checks divide by values that the bounds have checked by then.
    for group in (_bound_checks, _range_checks, _cross_checks, _precision_checks, _rl_menu_checks, _sandbox_checks,
                  _task_checks, _distributed_checks):
        for ok, msg in group(cfg):
            if not ok:
                raise ConfigError(msg)
    # sampler.engine=vllm is checked against the hardware by the trainer (policy/vllm_engine.py).
    # task.name, workflow.name, rl.advantage, rl.loss and rl.aggregation are checked against their
    # registries before training: resolving them here would import every task and workflow.
    return cfg


def _bound_checks(cfg: Config) -> list[tuple[bool, str]]:
    out = []
    for key, bound, strict, why in _LOWER_BOUNDS:
        v = _value(cfg, key)
        ok = v > bound if strict else v >= bound
        out.append((ok, f"{key} must be {'>' if strict else '>='} {bound:g}{f' ({why})' if why else ''}, got {v!r}"))
    return out


MAX_ITEMS = 26 + 26 * 26  # item labels A..Z, AA..ZZ (collective/grading.py)


def eval_cap(cfg: Config) -> int:
    """The largest team evaluation may staff, the CEO included (`eval.max_team_size`)."""
    return cfg.eval.max_team_size


def _range_checks(cfg: Config) -> list[tuple[bool, str]]:
    t, w = cfg.task, cfg.workflow
    return [
        (1 <= t.items_per_problem <= MAX_ITEMS,
         f"task.items_per_problem must be in [1, {MAX_ITEMS}] (items are labelled A..Z, AA..ZZ), got "
         f"{t.items_per_problem}"),
        (0 <= cfg.sampler.draft_tokens <= 16,
         f"sampler.draft_tokens must be in [0, 16] (0: one token per decode call), got {cfg.sampler.draft_tokens}"),
        (0 <= t.label_pool <= MAX_ITEMS,
         f"task.label_pool must be in [0, {MAX_ITEMS}] (items are labelled A..Z, AA..ZZ), got {t.label_pool}"),
        (2 <= t.modulus <= 10, f"task.modulus must be in [2, 10] (single-digit answers), got {t.modulus}"),
        (1 <= t.max_step < t.modulus, f"task.max_step must be in [1, modulus - 1], got {t.max_step}"),
        (0.0 <= t.dependency_rate <= 1.0, f"task.dependency_rate must be in [0, 1], got {t.dependency_rate}"),
        (t.max_chain >= 0, f"task.max_chain must be >= 0 (0: unbounded), got {t.max_chain}"),
        (0.0 <= t.board_demo_rate <= 1.0, f"task.board_demo_rate must be in [0, 1], got {t.board_demo_rate}"),
        (0.0 <= t.chain_demo_rate <= 1.0, f"task.chain_demo_rate must be in [0, 1], got {t.chain_demo_rate}"),
        (0 <= w.max_experts <= 8, f"workflow.max_experts must be in [0, 8], got {w.max_experts}"),
        (w.manager_hires >= 0, f"workflow.manager_hires must be >= 0, got {w.manager_hires}"),
        (w.manager_hires == 0 or w.name == "org",
         f"workflow.manager_hires={w.manager_hires} needs workflow.name=org (the only workflow that hires), "
         f"got {w.name!r}"),
        (w.span >= 0, f"workflow.span must be >= 0 (0: flat), got {w.span}"),
        (w.span == 0 or w.name in ("org", "single"),
         f"workflow.span={w.span} needs workflow.name=org (the only workflow that hires), got {w.name!r}"),
        (w.span == 0 or w.manager_hires == 0,
         f"workflow.span={w.span} and workflow.manager_hires={w.manager_hires} are two hierarchies: set one"),
        (0.0 <= cfg.rl.smaller_caps_fraction <= 1.0,
         f"rl.smaller_caps_fraction must be in [0, 1], got {cfg.rl.smaller_caps_fraction}"),
        (cfg.rl.smaller_caps_kl_scale >= 0.0,
         f"rl.smaller_caps_kl_scale must be >= 0, got {cfg.rl.smaller_caps_kl_scale}"),
        (cfg.rl.demo_anchor_coef >= 0.0, f"rl.demo_anchor_coef must be >= 0, got {cfg.rl.demo_anchor_coef}"),
        (cfg.rl.demo_anchor_opening_coef >= 0.0,
         f"rl.demo_anchor_opening_coef must be >= 0, got {cfg.rl.demo_anchor_opening_coef}"),
        (cfg.rl.demo_anchor_sequences >= 1,
         f"rl.demo_anchor_sequences must be >= 1, got {cfg.rl.demo_anchor_sequences}"),
        (0.0 <= cfg.rl.smaller_caps_time_exponent <= 1.0,
         f"rl.smaller_caps_time_exponent must be in [0, 1] (1: equal agent-seconds), got "
         f"{cfg.rl.smaller_caps_time_exponent}"),
        (cfg.eval.max_team_size >= w.max_experts + 1,
         f"eval.max_team_size must be >= workflow.max_experts + 1 = {w.max_experts + 1} (the evaluation cap is "
         f"at least the training cap), got {cfg.eval.max_team_size}"),
        (0 <= cfg.eval.team_size <= eval_cap(cfg),
         f"eval.team_size must be in [0, eval.max_team_size = {eval_cap(cfg)}] (0 = workflow.max_experts + 1), "
         f"got {cfg.eval.team_size}"),
    ]


def _cross_checks(cfg: Config) -> list[tuple[bool, str]]:
    """Checks that relate two keys (after every key is in range on its own)."""
    m, tl, w = cfg.model, cfg.time_limit, cfg.workflow
    min_ctx = cfg.sampler.max_new_tokens_per_turn + CONTEXT_MARGIN_TOKENS
    head_dim = m.hidden_size // m.num_heads
    return [
        (w.max_hires_per_rollout >= w.max_experts,
         "workflow.max_hires_per_rollout must be >= workflow.max_experts (or the cap cannot be reached), "
         f"got {w.max_hires_per_rollout} < {w.max_experts}"),
        (m.num_heads % m.num_kv_heads == 0,
         f"model.num_heads must be a multiple of model.num_kv_heads, got {m.num_heads} and {m.num_kv_heads}"),
        (bool(m.name_or_path) or (head_dim >= 2 and head_dim % 2 == 0),
         f"model.hidden_size // model.num_heads (the head dimension, {head_dim}) must be even and >= 2 "
         "(rotary embeddings rotate pairs of dimensions)"),
        (m.max_context_tokens >= min_ctx,
         f"model.max_context_tokens must be >= sampler.max_new_tokens_per_turn + {CONTEXT_MARGIN_TOKENS} "
         f"(= {min_ctx}: a problem header and one turn), got {m.max_context_tokens}"),
        (tl.schedule == "constant" or tl.ramp_steps == 0 or tl.start <= tl.end,
         f"time_limit.start ({tl.start:g}) must be <= time_limit.end ({tl.end:g}): the curriculum's deadline "
         "grows (time_limit.schedule=constant uses end alone)"),
    ]


# Half the spacing of each low-precision float near 0.02, a typical LLM weight's magnitude
# (2^-6 x 2^-mantissa bits / 2): an update smaller than this rounds back to the same weight.
_HALF_SPACING_AT_002 = {"bfloat16": 2.0 ** -14, "float16": 2.0 ** -17}


def _precision_checks(cfg: Config) -> list[tuple[bool, str]]:
    """Full weights trained in bfloat16/float16 at a learning rate whose steps round away."""
    m, sharing, lr = cfg.model, cfg.policy.sharing, cfg.rl.lr
    half = _HALF_SPACING_AT_002.get(m.dtype)
    if half is None or sharing == "isolated":  # float32, or LoRA adapters (PEFT keeps them in float32)
        return []
    return [(lr >= half,
             f"model.dtype={m.dtype} with policy.sharing={sharing} trains the weights themselves in {m.dtype}: an "
             f"AdamW step moves a weight by about rl.lr ({lr:g}), less than half the spacing of {m.dtype} numbers "
             f"near a typical weight of 0.02 ({half:.2g}), so the step rounds away and most weights never change. "
             "Use model.dtype=float32 with model.mixed_precision=bf16 (bfloat16 matmuls on float32 master weights; "
             "the default on CUDA), or LoRA adapters (policy.sharing=isolated, kept in float32)")]


# Estimators that take `rl.scale_rewards` (rl/advantages.py `options`); a plugin spec may too.
_SCALING_ESTIMATORS = ("grpo", "collective", "contribution", "leave_one_out")
# Built-in workflows whose team is staffed at the start: nobody is spawned during a rollout.
_FIXED_TEAMS = ("single", "voting", "eval_opt", "orch_workers")


def _rl_menu_checks(cfg: Config) -> list[tuple[bool, str]]:
    """The GRPO-family options, the contribution estimator and the PARL staged rewards."""
    rl, sh = cfg.rl, cfg.shaping
    out = [
        (rl.clip_eps_high == 0 or rl.clip_eps_high >= rl.clip_eps,
         f"rl.clip_eps_high must be 0 (= rl.clip_eps) or >= rl.clip_eps ({rl.clip_eps:g}): the clip bounds are "
         f"out of order, got {rl.clip_eps_high:g}"),
        (rl.dual_clip == 0 or rl.dual_clip > 1, f"rl.dual_clip must be 0 (off) or > 1 (a ratio bound above the "
                                                f"trust region, verl uses 3), got {rl.dual_clip:g}"),
        (0.0 <= rl.max_pad_fraction <= 1.0, f"rl.max_pad_fraction must be in [0, 1], got {rl.max_pad_fraction:g}"),
        (0.0 <= rl.contribution_coef <= 1.0, f"rl.contribution_coef must be in [0, 1], got {rl.contribution_coef:g}"),
        (rl.scale_rewards == "group" or rl.advantage in _SCALING_ESTIMATORS or ":" in rl.advantage,
         f"rl.scale_rewards={rl.scale_rewards} applies to rl.advantage in {list(_SCALING_ESTIMATORS)}, "
         f"not {rl.advantage!r}"),
        (rl.advantage not in ("contribution", "leave_one_out") or cfg.workflow.name != "single",
         f"rl.advantage={rl.advantage} needs per-agent contributions; workflow.name=single has one agent "
         "(use collective or grpo)"),
        (not rl.multiplicity_lr_scaled or cfg.policy.sharing != "shared",
         "rl.multiplicity_lr_scaled steps each role's own optimizer; policy.sharing=shared has one optimizer for "
         "every role (use rl.multiplicity_normalized, or policy.sharing=isolated)"),
    ]
    for term in ("instantiation", "finish"):
        coef, start, end = (getattr(sh, f"{term}_{k}") for k in ("coef", "anneal_start", "anneal_end"))
        out.append((end == 0 or end > start, f"shaping.{term}_anneal_end ({end}) must be 0 (never annealed) or > "
                                             f"shaping.{term}_anneal_start ({start}): the schedule ends before it starts"))
        out.append((coef == 0 or cfg.workflow.name not in _FIXED_TEAMS,
                    f"shaping.{term}_coef > 0 rewards spawned sub-agents; workflow.name={cfg.workflow.name} staffs its "
                    "team at the start and spawns none (use workflow.name=org)"))
    return out


def _task_checks(cfg: Config) -> list[tuple[bool, str]]:
    t = cfg.task
    return [
        (t.name != "math" or t.dataset_format != "deepcoder",
         "task.dataset_format=deepcoder is a code format; math takes dapo or gsm8k"),
        (t.name != "code" or t.dataset_format in ("auto", "deepcoder"),
         "task.dataset_format for code must be auto or deepcoder"),
        (t.name != "arith" or not t.dataset,
         f"task.dataset={t.dataset!r} is for task.name=math or code (arith generates its problems)"),
        (t.name != "math" or t.dataset != "humaneval", "task.dataset=humaneval is a code dataset; math takes champ or a file"),
        (t.name != "code" or t.dataset != "champ", "task.dataset=champ is a math dataset; code takes humaneval or a file"),
    ]


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
        (1 <= cfg.learner.processes <= 64, f"learner.processes must be in [1, 64], got {cfg.learner.processes}"),
        (1 <= cfg.warmstart.processes <= 64, f"warmstart.processes must be in [1, 64], got {cfg.warmstart.processes}"),
    ]
