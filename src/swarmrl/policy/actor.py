"""The LLM actor: the runtime's batch of turn requests -> one sampler call.

It takes a PolicySet (policy/sharing.py) so that, under per-role policies, each request is
sampled by its agent's role policy; a plain Policy is wrapped as one shared policy.
"""

from __future__ import annotations

from typing import Sequence

from swarmrl import seeds
from swarmrl.policy.model import Policy
from swarmrl.policy.sampler import Sample
from swarmrl.policy.sharing import PolicySet, make_policy_set


class LLMActor:
    def __init__(self, policies: PolicySet | Policy, max_new_tokens: int, greedy: bool = False,
                 temperature: float = 1.0, continuous: bool = True, prefix_cache: bool = True,
                 kv_cache_mb: float = 0.0, share_prompts: bool = True, draft_tokens: int = 0):
        """`kv_cache_mb`: cap on the KV caches kept between turns (0 = no cap); `share_prompts`:
        prompts that start like an earlier one run only their remainder (sampler.share_prompts);
        `draft_tokens`: sampler.draft_tokens (continuous batching only)."""
        if isinstance(policies, Policy):
            policies = make_policy_set(policies, "shared", ["any"], temperature=temperature)
        self.policies = policies
        self.max_new_tokens = max_new_tokens
        self.greedy = greedy
        self.generated_tokens = 0  # running count, for tokens/s
        self.continuous, self.prefix_cache, self.kv_cache_mb = continuous, prefix_cache, kv_cache_mb
        self.share_prompts, self.draft_tokens = share_prompts, draft_tokens
        # What a stream's draft table starts from: the previous RL step's turns (the trainer sets it)
        self.draft_corpus: list = []

    @classmethod
    def from_config(cls, sampler_cfg, policies: PolicySet | Policy, greedy: bool = False) -> "LLMActor":
        return cls(policies, sampler_cfg.max_new_tokens_per_turn, greedy=greedy, temperature=sampler_cfg.temperature,
                   continuous=sampler_cfg.batching == "continuous", prefix_cache=sampler_cfg.prefix_cache,
                   kv_cache_mb=sampler_cfg.kv_cache_mb, share_prompts=sampler_cfg.share_prompts,
                   draft_tokens=sampler_cfg.draft_tokens)

    def act(self, requests: Sequence, seed: int) -> list[Sample]:
        out = self.policies.generate([r.prompt for r in requests], [r.agent.role for r in requests],
                                     self.max_new_tokens, seed, greedy=self.greedy,
                                     row_seeds=[turn_seed(seed, r) for r in requests])
        self.generated_tokens += sum(len(s.ids) for s in out)
        return out

    def open_stream(self) -> "ActorStream | None":
        """Continuous batching across rollouts (collective/runtime.py), when the policies allow it."""
        stream = (self.policies.stream(self.max_new_tokens, greedy=self.greedy, kv_cache_mb=self.kv_cache_mb,
                                       share_prompts=self.share_prompts, draft_tokens=self.draft_tokens,
                                       draft_corpus=self.draft_corpus)
                  if self.continuous else None)
        return None if stream is None else ActorStream(self, stream)


class ActorStream:
    """Requests in, (request, reply) pairs out as each turn finishes; same seeds as `act`."""

    def __init__(self, actor: LLMActor, stream):
        self.actor, self.stream = actor, stream
        self.requests: dict[int, object] = {}  # tag -> request (requests are not hashable)
        self.next_tag = 0

    def add(self, requests: Sequence, seed: int) -> None:
        for r in requests:
            adapter = self.actor.policies.adapter_for(r.agent.role)
            # key: the agent, whose next prompt extends this one (its KV cache is reused)
            key = (id(r.rollout), r.agent.name) if self.actor.prefix_cache else None  # as in `finished`
            self.stream.add(self.next_tag, r.prompt, adapter, turn_seed(seed, r), key=key)
            self.requests[self.next_tag] = r
            self.next_tag += 1

    def busy(self) -> bool:
        return self.stream.busy()

    def finished(self, rollout) -> None:
        """Drop the saved KV caches of the rollout's agents that will take no further turn: all
        of them once the rollout is over, else those whose status is final (done, cut, idle;
        collective/runtime.py `_start_time` gives only active and fired agents a next turn).
        The runtime calls it after applying a rollout's wave and handing in the next one."""
        if not self.actor.prefix_cache:
            return
        for a in rollout.agents.values():
            if rollout.done or a.status not in ("active", "fired"):
                self.stream.finished((id(rollout), a.name))

    def step(self) -> list[tuple[object, Sample]]:
        out = [(self.requests.pop(tag), s) for tag, s in self.stream.step()]
        self.actor.generated_tokens += sum(len(s.ids) for _, s in out)
        return out


def turn_seed(wave_seed: int, request) -> int:
    """The sampling seed of one agent turn (seeds.turn_seed): a function of the turn alone
    (rollout index, agent, its turn number) and the wave seed, never of the batch it is sampled
    in. A rollout's k-th wave is the same wave whichever other rollouts run beside it, so a
    rollout samples the same tokens in one process or on any Ray worker (distributed/)."""
    return seeds.turn_seed(wave_seed, request.rollout.index, request.agent.name, request.agent.turns)
