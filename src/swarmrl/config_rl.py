"""The learning sections of the config, `shaping` and `rl` (their own module to keep
config_schema.py short): one dataclass per section, one docstring per field.

Imports nothing from swarmrl: config_schema.py imports both classes and re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


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
    wrong_cost: float = 0.0
    """Reward lost per item decided by a wrong submission that landed by the deadline, in items
    (1 = a wrong answer costs what a right one earns). 0 = RLCR: a wrong answer only forgoes its
    item. Why: under a deadline an item the team will not reach is free to guess (a tenth of an
    item for arith), and a policy that learns to append guesses to its turns loses items it would
    have solved at longer limits (README, the headline checks). Applies in every mode; the score
    that evaluations report is the task's own, without it."""
    instantiation_coef: float = 0.0
    """PARL staged reward, lambda1: reward per rollout for spawning sub-agents, `instantiation_coef`
    * (agents created after the rollout started, by the deadline) / (the team cap), annealed by
    the schedule below. Kimi K2.5's r_parallel: against serial collapse early in training. 0 = off."""
    instantiation_anneal_start: int = 0
    """Step at which lambda1 starts to fall linearly (full value before it)."""
    instantiation_anneal_end: int = 0
    """Step at which lambda1 reaches 0 (and stays). 0 = never annealed (lambda1 constant); else > start."""
    finish_coef: float = 0.0
    """PARL staged reward, lambda2: reward per rollout for sub-agents finishing their tasks,
    `finish_coef` * (spawned sub-agents that took work and submitted all of it by the deadline) /
    (spawned sub-agents). Kimi K2.5's r_finish: against spurious parallelism. 0 = off."""
    finish_anneal_start: int = 0
    """Step at which lambda2 starts to fall linearly (full value before it)."""
    finish_anneal_end: int = 0
    """Step at which lambda2 reaches 0 (and stays). 0 = never annealed (lambda2 constant); else > start."""


@dataclass
class RLConfig:
    steps: int = 40
    """Optimizer steps of RL training (at least 1)."""
    problems_per_step: int = 4
    """Distinct problems per step."""
    rollouts_per_problem: int = 8
    """Rollouts of each problem (the group that the advantage is normalised within)."""
    advantage: str = "collective"
    """Advantage estimator (registry in rl/advantages.py). Built-in: `collective`, `grpo`, `rloo`,
    `per_role`, `contribution`, `leave_one_out`; `package.module:fn` or `path/file.py:fn` loads a
    plugin function."""
    loss: str = "ppo_clip"
    """Policy loss (registry in rl/losses.py). Built-in: `ppo_clip`, `pg`; `package.module:fn`
    or `path/file.py:fn` loads a plugin function."""
    clip_eps: float = 0.2
    """PPO clip range for the importance ratio."""
    clip_eps_high: float = 0.0
    """Upper clip range (DAPO's clip-higher; TRL `epsilon_high`, verl `clip_ratio_high`): the ratio is
    clipped to [1 - clip_eps, 1 + clip_eps_high]. 0 = clip_eps (symmetric). DAPO uses 0.28 with 0.2."""
    dual_clip: float = 0.0
    """Dual-clip PPO (verl `clip_ratio_c`): for a negative advantage the token loss is capped at
    -A * dual_clip, so a ratio that grew huge cannot blow up the update. 0 = off; else > 1 (verl: 3)."""
    scale_rewards: Literal["group", "batch", "none"] = "group"
    """grpo / collective / contribution (TRL `scale_rewards`): divide (r - group mean) by the group's
    std (`group`), by the std of every rollout reward of the step (`batch`), or not at all (`none`,
    Dr. GRPO's recommendation: no question-level difficulty bias)."""
    drop_zero_spread_groups: bool = False
    """DAPO's dynamic sampling without re-sampling: the sequences of a problem group whose rollout
    rewards are all equal leave the update (no gradient, no share of the token mean); logged as
    `adv/groups_dropped`. The step's batch shrinks instead of being refilled."""
    contribution_coef: float = 0.5
    """`contribution` / `leave_one_out` estimators: beta in (1 - beta) * collective advantage + beta *
    the agent's normalised verified contribution or difference reward (rl/credit.py). 0 = collective."""
    kl_coef: float = 0.0
    """Penalty on KL to the initial policy (0 = off, as in both sources)."""
    smaller_caps_fraction: float = 0.0
    """Fraction of each step's problems (whole groups) whose CEO is told a smaller cap, drawn
    uniformly from 0..max_experts-1 (org workflow only). 0 = RLCR as published: every CEO may
    hire max_experts. Why: trained only at the full cap, the shared policy's team plan
    overrides the `max=` header, and the checkpoint's smaller team sizes in `swarmrl scale`
    are degenerate (measured on the demo: score 0 alone, 0.20 with one expert). The step's
    collective metrics cover the full-cap rollouts only; `capped/...` reports the others."""
    smaller_caps: str = ""
    """Comma-separated caps the smaller-cap groups draw from, uniformly (e.g. `0,1,3`: teams of
    1, 2 and 4); empty = every cap 0..max_experts-1. Fewer values give each more groups. Inert
    while `smaller_caps_fraction` is 0."""
    spans: str = ""
    """Comma-separated spans of control each problem of a step draws from, uniformly, under a span
    (`workflow.span` > 0; e.g. `1,2,3,4,8`: at the cap of 8, trees of 1 manager of 7, 2 of 3, 3
    of 2-2-1, 4 of 1, and flat), so RL rehearses every quota the warm start shows rather than one
    per level. Empty = `workflow.span` for every problem."""
    smaller_caps_kl_scale: float = 1.0
    """The KL term's coefficient on the sequences of smaller-cap groups is `kl_coef` times this:
    above 1, the small teams stay closer to the initial policy than the full team, which may
    then move further (a lower `kl_coef`). On the demo, kl_coef 0.03 with 10 here did not keep
    the single agent: it stopped after about 2.5 items (README, small teams). Inert while
    `kl_coef` or `smaller_caps_fraction` is 0."""
    smaller_caps_time_exponent: float = 0.0
    """Under `shaping.mode=time_limit`, a smaller-cap group's deadline is the step's times
    ((max_experts + 1) / (its cap + 1)) ** this. 0: the same deadline for every group. 1: every
    group gets the full team's agent-seconds (a team of 4 under a 5.5 s deadline gets 12.4 s, a
    single agent 49.5 s), so a small team is scored on the whole problem rather than its first
    items. 0.5: halfway on a log scale (a single agent 16.5 s, a team of 4 8.25 s). 1 did not
    keep the demo's single agent at the warm start's level past the trained limits (0.06-0.11
    below it at 12-20 s; README, small teams). Inert while `smaller_caps_fraction` is 0."""
    demo_anchor_coef: float = 0.0
    """Advantage of the task's scripted single-agent demonstrations mixed into every update, their
    behaviour log-probs the policy's own, so their gradient is this times their log-likelihood's
    (rl/anchor.py; PPO-ptx). 0 = none (RLCR as published). Why: a deadline trains a single agent's
    first items only, and its later ones drift. Org and single workflows, shared policy."""
    demo_anchor_sequences: int = 4
    """Scripted solo demonstrations per step (one sequence each) under `demo_anchor_coef`."""
    demo_anchor_opening_coef: float = 0.0
    """Extra advantage on each demonstration's first turn (a copy of the sequence cut after its
    first reply joins the update): the opening alone, weighted more than the rest. Why: the one
    failure the demonstrations did not cure is a single agent that opens like an expert (one
    item taken, not the whole board). 0 = none. Inert while `demo_anchor_coef` is 0."""
    lr: float = 3e-4
    """AdamW learning rate."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    grad_clip: float = 1.0
    """Global gradient-norm clip."""
    micro_batch_tokens: int = 16384
    """Padded tokens per forward/backward micro-batch (bounds memory; does not change the math)."""
    length_buckets: bool = True
    """Fill the learner's micro-batches in order of sequence length, so each holds sequences of
    similar length and little padding (`learner/pad_fraction` reports the waste); false = in
    the minibatch's order. Same loss and gradient up to float summation order (last bits)."""
    max_pad_fraction: float = 0.1
    """With `length_buckets`: a micro-batch also closes when the next (longer) sequence would make
    more than this share of its padded cells padding, so a budget that holds the whole minibatch
    does not pad every sequence to the longest. 1.0 = only `micro_batch_tokens` closes one."""
    share_prefixes: bool = True
    """Run each prompt prefix that several sequences of a micro-batch share (the problem every
    agent of a rollout reads, in every rollout of a group) through the model once, the rest of
    each sequence attending to its keys and values (rl/prefix.py); micro-batches keep such
    sequences together. Same log-probs and gradient up to float rounding (last bits); models
    that do not split into a body and a plain head, or have sliding-window layers, run whole
    sequences, and so do an fsdp-sharded learner and `model.gradient_checkpointing`. `learner/pad_fraction` then counts the
    prefix cells too."""
    logprob_chunk_tokens: int = 0
    """Learner log-probs over at most this many (sequence, position) pairs at a time, each
    chunk's output head and log-softmax recomputed in the backward, so no [batch, length,
    vocabulary] logits tensor ever exists (rl/batch.py `token_logprobs`). 0 = the full logits at
    once. At a 151,936-token vocabulary the full logits cost ~2.5 GB per 1,024 tokens in float32,
    several times over in the backward: set e.g. 1024 for real models. With chunks only the
    positions the loss reads (the generated tokens) go through the head at all, so an agent's
    long prompt and observations cost the body alone. Same math up to float rounding (last
    bits), so 0 stays the default for bit-identical tiny-model runs."""
    minibatches_per_step: int = 1
    """Optimizer updates per step; >1 makes the PPO ratio differ from 1 after the first."""
    aggregation: str = "token_mean"
    """How tokens share the gradient (registry in rl/aggregation.py): `token_mean`, `seq_mean`,
    `dr_grpo` (a fixed divisor per token, Dr. GRPO), or `role_balanced` (each role type gets equal
    mass whatever its token count; the mitigation for role capture under SP);
    `package.module:fn` or `path/file.py:fn` loads a plugin."""
    multiplicity_normalized: bool = False
    """Divide each role's loss by its multiplicity (the mitigation for gradient amplification:
    three generators then weigh as one). Under a shared policy this reweights the roles within
    one gradient. Under isolated policies each adapter has its own AdamW, which normalises a
    constant loss scale away: the adapter's updates stay the same (and its measured grad norm,
    which the amplification detector reads, shrinks by the multiplicity); use
    `multiplicity_lr_scaled` there."""
    multiplicity_lr_scaled: bool = False
    """Isolated policies: step each role's adapter (or model copy) at rl.lr / its multiplicity,
    the form of the multiplicity mitigation that changes what a per-adapter AdamW does."""
    role_grad_interval: int = 5
    """Every this many steps, measure each role's gradient norm (shared policy: one extra
    backward pass per role; isolated: the adapter's own norm, every step). 0 = never."""
