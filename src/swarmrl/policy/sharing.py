"""Policy sharing across roles: `shared | isolated | isolated_full` (the workflow study's SP / IP).

- `shared` (SharedPolicies): every role samples from and trains one set of parameters (RLCR;
  the paper's SP).
- `isolated` (LoraPolicies): one PEFT LoRA adapter per role *type* on one frozen base model
  (the paper's IP: all generators share the generator adapter). Sampling is one batch with
  mixed adapters (policy/lora_batch.py, or PEFT's `adapter_names`), training updates each adapter
  with its own optimizer.
- `isolated_full` (FullCopyPolicies): a full copy of the model per role type, for tiny models
  (no LoRA).

A *slot* is what one optimizer updates: "shared", or a role type. The trainer asks for a
slot's parameters, runs the model of a slot, and saves/loads every slot through the
`PolicySet` interface; nothing outside this module needs to know which mode is on.
"""

from __future__ import annotations

import copy
import dataclasses
from abc import ABCMeta, abstractmethod
from contextlib import contextmanager
from typing import Iterator

import torch

from swarmrl.policy.model import Policy
from swarmrl.policy.sampler import DecodeStream, HFSampler, Sample
from swarmrl.seeds import seed_for

SHARING_MODES = ("shared", "isolated", "isolated_full")
# Qwen-style projection names; other architectures set policy.lora_targets.
DEFAULT_LORA_TARGETS = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"

Groups = dict[str, dict[str, torch.Tensor]]


class _ByMode(ABCMeta):
    """`PolicySet(policy, sharing, role_types, ...)` builds the subclass for `sharing`
    (`make_policy_set`); a subclass is constructed directly as usual."""

    def __call__(cls, *args, **kwargs):
        if cls is PolicySet:
            return make_policy_set(*args, **kwargs)
        return super().__call__(*args, **kwargs)


class PolicySet(metaclass=_ByMode):
    """The policies of every role of a run, by slot. Subclasses build `policies` (slot -> Policy)
    and say how a slot trains, samples and is checkpointed."""

    sharing: str  # the policy.sharing mode this class implements
    one_model: bool = True  # every slot runs through one model (one sampling batch, one vLLM engine)
    adapters: bool = False  # slots are LoRA adapters on one frozen base model

    def __init__(self, policy: Policy, role_types: list[str], temperature: float = 1.0):
        if not role_types:
            raise ValueError("a policy set needs at least one role type")
        self.role_types = list(role_types)
        self.temperature = temperature
        self.base = policy  # the model every slot starts from
        self.policies: dict[str, Policy] = self._build(policy)
        # Sampling mode between updates (rl/update.py switches to train mode for each update and
        # back). PEFT leaves a new adapter model in train mode, and a sampler on a model in train
        # mode switches it to eval and back at every decode step: a walk over every submodule
        # each way, more than the step itself costs on a small model.
        for model in self.modules():
            model.eval()
        self.samplers = {s: self._sampler(p) for s, p in self.policies.items()}
        # An external engine (policy/vllm_engine.py) replaces the HF samplers when set; it is
        # handed every slot's weights by `sync_engine` after each update.
        self.engine = None

    @abstractmethod
    def _build(self, policy: Policy) -> dict[str, Policy]:
        """slot -> the Policy that slot samples from and trains."""

    def _sampler(self, policy: Policy) -> HFSampler:
        return HFSampler(policy, self.temperature)

    # ------------------------------------------------------------------ slots
    @property
    def slots(self) -> list[str]:
        return list(self.policies)

    def slot(self, role: str) -> str:
        if role not in self.policies:
            raise KeyError(f"no policy for role '{role}' (roles: {self.role_types})")
        return role

    def adapter_for(self, role: str) -> str | None:
        """The LoRA adapter a sampler row of `role` runs through (None: the model as it is)."""
        return None

    frozen: frozenset = frozenset()  # slots that never train (policy.frozen_roles; set by build.py)

    def trains(self, role: str) -> bool:
        """Do this role's tokens carry gradient? False for a frozen slot's roles."""
        return self.slot(role) not in self.frozen

    def parameters(self, slot: str) -> list[torch.nn.Parameter]:
        """What the slot's optimizer updates."""
        return list(self.policies[slot].model.parameters())

    @contextmanager
    def model_for(self, slot: str) -> Iterator[torch.nn.Module]:
        """The module to run for a slot's tokens."""
        yield self.policies[slot].model

    @contextmanager
    def reference(self, slot: str) -> Iterator[torch.nn.Module]:
        """The initial policy of a slot, for the optional KL term: a frozen copy of the base
        model, taken at the first call."""
        if not hasattr(self, "_ref"):
            self._ref = copy.deepcopy(self.base.model).eval()
        yield self._ref

    def modules(self) -> list[torch.nn.Module]:
        return list({id(p.model): p.model for p in self.policies.values()}.values())

    # ------------------------------------------------------------------ sampling
    def stream(self, max_new_tokens: int, seed: int = 0, greedy: bool = False,
               kv_cache_mb: float = 0.0, share_prompts: bool = True, draft_tokens: int = 0,
               draft_corpus: list | None = None) -> DecodeStream | None:
        """Continuous batching (HFSampler.stream) where one batch can hold every row: shared, or
        isolated with mixed adapters. None for full per-role copies and external engines.
        `kv_cache_mb`: cap on the saved KV caches (sampler.kv_cache_mb; 0 = no cap);
        `share_prompts`: sampler.share_prompts; `draft_tokens`: sampler.draft_tokens, guessed from
        `draft_corpus` and the stream's own turns (policy/speculative.py)."""
        if self.engine is not None or not self.one_model:
            return None
        return self.samplers[self.slots[0]].stream(max_new_tokens, seed, greedy, kv_cache_mb=kv_cache_mb,
                                                   share_prompts=share_prompts, draft_tokens=draft_tokens,
                                                   draft_corpus=draft_corpus)

    def generate(self, prompts: list[list[int]], roles: list[str], max_new_tokens: int, seed: int,
                 greedy: bool = False, row_seeds: list[int] | None = None) -> list[Sample]:
        """`row_seeds`: one sampling seed per prompt (HFSampler.generate)."""
        if self.engine is not None:  # vLLM: every slot (adapter) in one engine
            return self.engine.generate(prompts, max_new_tokens, seed, greedy,
                                        adapters=[self.slot(r) for r in roles], row_seeds=row_seeds)
        return self._generate(prompts, roles, max_new_tokens, seed, greedy, row_seeds)

    @abstractmethod
    def _generate(self, prompts: list[list[int]], roles: list[str], max_new_tokens: int, seed: int,
                  greedy: bool, row_seeds: list[int] | None) -> list[Sample]:
        """`generate` on the HF samplers."""

    # ------------------------------------------------------------------ checkpoints
    @abstractmethod
    def state_tensors(self) -> Groups:
        """Checkpoint groups: `policy` (shared), `adapter_<role>`, or `policy_<role>` (full copies)."""

    def load_state_tensors(self, groups: Groups, source: str) -> None:
        want = list(self.state_tensors())
        missing = [g for g in want if g not in groups]
        if missing:
            raise KeyError(f"{source}: checkpoint has no {', '.join(missing)} "
                           f"(policy.sharing={self.sharing}, roles {self.role_types}; it holds {sorted(groups)})")
        self._load_groups(groups, source)

    @abstractmethod
    def _load_groups(self, groups: Groups, source: str) -> None:
        """Copy the (present) checkpoint groups into the slots' weights."""


class SharedPolicies(PolicySet):
    """One policy for every role: one slot, "shared"."""

    sharing = "shared"

    def _build(self, policy: Policy) -> dict[str, Policy]:
        return {"shared": policy}

    def slot(self, role: str) -> str:
        return "shared"

    def _generate(self, prompts, roles, max_new_tokens, seed, greedy, row_seeds) -> list[Sample]:
        return self.samplers["shared"].generate(prompts, max_new_tokens, seed, greedy, row_seeds=row_seeds)

    def state_tensors(self) -> Groups:
        return {"policy": self.base.model.state_dict()}

    def _load_groups(self, groups: Groups, source: str) -> None:
        _load(self.base.model, groups["policy"], source)


class LoraPolicies(PolicySet):
    """One LoRA adapter per role type on one frozen base model (PEFT), named after the role."""

    sharing = "isolated"
    adapters = True

    def __init__(self, policy: Policy, role_types: list[str], lora_rank: int = 8, lora_alpha: float = 16.0,
                 lora_targets: str = DEFAULT_LORA_TARGETS, temperature: float = 1.0, batched_adapters: bool = True):
        """`batched_adapters`: sampler.batched_adapters (policy/lora_batch.py)."""
        self.lora_rank, self.lora_alpha, self.lora_targets = lora_rank, lora_alpha, lora_targets
        self.batched_adapters = batched_adapters
        super().__init__(policy, role_types, temperature)

    def _sampler(self, policy: Policy) -> HFSampler:
        return HFSampler(policy, self.temperature, batched_adapters=self.batched_adapters)

    def _build(self, policy: Policy) -> dict[str, Policy]:
        from peft import LoraConfig, get_peft_model
        targets = [t.strip() for t in self.lora_targets.split(",") if t.strip()]
        lcfg = LoraConfig(r=self.lora_rank, lora_alpha=self.lora_alpha, lora_dropout=0.0, target_modules=targets)
        # LoRA A matrices draw from torch's RNG: the adapters are created in role order
        peft_model = get_peft_model(policy.model, lcfg, adapter_name=self.role_types[0])
        for r in self.role_types[1:]:
            peft_model.add_adapter(r, lcfg)
        wrapped = dataclasses.replace(policy, model=peft_model)
        return {r: wrapped for r in self.role_types}

    def adapter_for(self, role: str) -> str | None:
        return self.slot(role)

    def _lora_named(self, slot: str) -> list[tuple[str, torch.nn.Parameter]]:
        """The slot's adapter weights by name (every slot's Policy wraps the same PEFT model)."""
        marker = f".{slot}."
        return [(n, p) for n, p in self.policies[slot].model.named_parameters() if "lora_" in n and marker in n]

    def parameters(self, slot: str) -> list[torch.nn.Parameter]:
        """That adapter's LoRA weights only."""
        params = [p for _, p in self._lora_named(slot)]
        if not params:
            raise ValueError(f"adapter '{slot}' has no LoRA parameters (check policy.lora_targets)")
        return params

    @contextmanager
    def model_for(self, slot: str) -> Iterator[torch.nn.Module]:
        """The model with the slot's adapter active."""
        model = self.policies[slot].model
        model.set_adapter(slot)
        for p in self.parameters(slot):  # set_adapter freezes the others; ours must train
            p.requires_grad_(True)
        yield model

    @contextmanager
    def reference(self, slot: str) -> Iterator[torch.nn.Module]:
        """The base model: adapters off."""
        with self.policies[slot].model.disable_adapter():
            yield self.policies[slot].model

    def _generate(self, prompts, roles, max_new_tokens, seed, greedy, row_seeds) -> list[Sample]:
        """One batch, each row through its role's adapter."""
        sampler = self.samplers[self.slot(roles[0])]
        return sampler.generate(prompts, max_new_tokens, seed, greedy, adapters=[self.slot(r) for r in roles],
                                row_seeds=row_seeds)

    def state_tensors(self) -> Groups:
        return {f"adapter_{r}": {n: p.detach() for n, p in self._lora_named(r)} for r in self.role_types}

    def _load_groups(self, groups: Groups, source: str) -> None:
        params = dict(self.policies[self.role_types[0]].model.named_parameters())
        with torch.no_grad():
            for r in self.role_types:
                for n, t in groups[f"adapter_{r}"].items():
                    if n not in params:
                        raise KeyError(f"{source}: adapter tensor {n} does not match the model")
                    params[n].copy_(t)


class FullCopyPolicies(PolicySet):
    """A full copy of the model per role type (tiny models): one sampling batch per copy."""

    sharing = "isolated_full"
    one_model = False

    def _build(self, policy: Policy) -> dict[str, Policy]:
        return {r: dataclasses.replace(policy, model=copy.deepcopy(policy.model)) for r in self.role_types}

    def _generate(self, prompts, roles, max_new_tokens, seed, greedy, row_seeds) -> list[Sample]:
        out: list[Sample | None] = [None] * len(prompts)
        for k, slot in enumerate(self.slots):  # one batch per full model
            idx = [i for i, r in enumerate(roles) if self.slot(r) == slot]
            if idx:
                rs = [row_seeds[i] for i in idx] if row_seeds is not None else None
                for i, s in zip(idx, self.samplers[slot].generate([prompts[i] for i in idx], max_new_tokens,
                                                                  seed_for("slot", seed, k), greedy, row_seeds=rs)):
                    out[i] = s
        return out  # type: ignore[return-value]

    def state_tensors(self) -> Groups:
        return {f"policy_{r}": p.model.state_dict() for r, p in self.policies.items()}

    def _load_groups(self, groups: Groups, source: str) -> None:
        for r, p in self.policies.items():
            _load(p.model, groups[f"policy_{r}"], source)


_CLASSES: dict[str, type[PolicySet]] = {c.sharing: c for c in (SharedPolicies, LoraPolicies, FullCopyPolicies)}


def policy_class(sharing: str) -> type[PolicySet]:
    """The PolicySet subclass of a policy.sharing mode (for checks before one is built)."""
    if sharing not in SHARING_MODES:
        raise ValueError(f"unknown policy.sharing '{sharing}' (one of {SHARING_MODES})")
    return _CLASSES[sharing]


def make_policy_set(policy: Policy, sharing: str, role_types: list[str], lora_rank: int = 8,
                    lora_alpha: float = 16.0, lora_targets: str = DEFAULT_LORA_TARGETS,
                    temperature: float = 1.0, batched_adapters: bool = True) -> PolicySet:
    """The policies of `role_types` under `sharing` (the LoRA settings apply to `isolated` only)."""
    cls = policy_class(sharing)
    if not role_types:
        raise ValueError("a policy set needs at least one role type")
    if cls.adapters:
        return cls(policy, role_types, lora_rank=lora_rank, lora_alpha=lora_alpha, lora_targets=lora_targets,
                   temperature=temperature, batched_adapters=batched_adapters)
    return cls(policy, role_types, temperature=temperature)


def tokenizer_of(policy: "Policy | PolicySet"):
    """The tokenizer of one policy or of a run's per-role policies (they share the base's)."""
    return policy.base.tokenizer if isinstance(policy, PolicySet) else policy.tokenizer


def load_weights(model: torch.nn.Module, sd: dict[str, torch.Tensor], source: str) -> None:
    """Copy a state dict into a model of the same architecture (KeyError naming `source` if not)."""
    _load(model, sd, source)


def _load(model: torch.nn.Module, sd: dict[str, torch.Tensor], source: str) -> None:
    missing, unexpected = model.load_state_dict(sd, strict=False)
    real_missing = [k for k in missing if "lm_head" not in k]  # tied embeddings are stored once
    if real_missing or unexpected:
        raise KeyError(f"{source}: weights do not match the model (missing {real_missing[:3]}, unexpected {unexpected[:3]})")
