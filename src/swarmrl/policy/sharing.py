"""Policy sharing across roles: `shared | isolated | isolated_full` (the workflow study's SP / IP).

- `shared`: every role samples from and trains one set of parameters (RLCR; the paper's SP).
- `isolated`: one PEFT LoRA adapter per role *type* on one frozen base model (the paper's
  IP: all generators share the generator adapter). Sampling is one batch with mixed
  adapters (PEFT's `adapter_names`), training updates each adapter with its own optimizer.
- `isolated_full`: a full copy of the model per role type, for tiny models (no LoRA).

A *slot* is what one optimizer updates: "shared", or a role type. The trainer asks for a
slot's parameters, runs the model of a slot, and saves/loads every slot; nothing else in
swarmrl needs to know which mode is on.
"""

from __future__ import annotations

import copy
import dataclasses
from contextlib import contextmanager
from typing import Iterator

import torch

from swarmrl.policy.model import Policy
from swarmrl.policy.sampler import DecodeStream, HFSampler, Sample

SHARING_MODES = ("shared", "isolated", "isolated_full")
# Qwen-style projection names; other architectures set policy.lora_targets.
DEFAULT_LORA_TARGETS = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"


class PolicySet:
    def __init__(self, policy: Policy, sharing: str, role_types: list[str], lora_rank: int = 8,
                 lora_alpha: float = 16.0, lora_targets: str = DEFAULT_LORA_TARGETS, temperature: float = 1.0):
        if sharing not in SHARING_MODES:
            raise ValueError(f"unknown policy.sharing '{sharing}' (one of {SHARING_MODES})")
        if not role_types:
            raise ValueError("a policy set needs at least one role type")
        self.sharing = sharing
        self.role_types = list(role_types)
        self.temperature = temperature
        self.base = policy  # the model every slot starts from (for isolated: wrapped in PEFT below)
        if sharing == "shared":
            self.policies = {"shared": policy}
        elif sharing == "isolated_full":
            self.policies = {r: dataclasses.replace(policy, model=copy.deepcopy(policy.model)) for r in role_types}
        else:
            from peft import LoraConfig, get_peft_model
            targets = [t.strip() for t in lora_targets.split(",") if t.strip()]
            lcfg = LoraConfig(r=lora_rank, lora_alpha=lora_alpha, lora_dropout=0.0, target_modules=targets)
            peft_model = get_peft_model(policy.model, lcfg, adapter_name=role_types[0])
            for r in role_types[1:]:
                peft_model.add_adapter(r, lcfg)
            wrapped = dataclasses.replace(policy, model=peft_model)
            self.policies = {r: wrapped for r in role_types}
        self.samplers = {s: HFSampler(p, temperature) for s, p in self.policies.items()}
        # An external engine (policy/vllm_engine.py) replaces the HF samplers when set; it is
        # handed every slot's weights by `sync_engine` after each update.
        self.engine = None

    # ------------------------------------------------------------------ slots
    @property
    def slots(self) -> list[str]:
        return list(self.policies)

    def slot(self, role: str) -> str:
        if self.sharing == "shared":
            return "shared"
        if role not in self.policies:
            raise KeyError(f"no policy for role '{role}' (roles: {self.role_types})")
        return role

    def parameters(self, slot: str) -> list[torch.nn.Parameter]:
        """What the slot's optimizer updates (for isolated: that adapter's LoRA weights only)."""
        model = self.policies[slot].model
        if self.sharing != "isolated":
            return list(model.parameters())
        marker = f".{slot}."
        params = [p for n, p in model.named_parameters() if "lora_" in n and marker in n]
        if not params:
            raise ValueError(f"adapter '{slot}' has no LoRA parameters (check policy.lora_targets)")
        return params

    @contextmanager
    def model_for(self, slot: str) -> Iterator[torch.nn.Module]:
        """The module to run for a slot's tokens (sets the active adapter under isolated)."""
        model = self.policies[slot].model
        if self.sharing == "isolated":
            model.set_adapter(slot)
            for p in self.parameters(slot):  # set_adapter freezes the others; ours must train
                p.requires_grad_(True)
        yield model

    @contextmanager
    def reference(self, slot: str) -> Iterator[torch.nn.Module]:
        """The initial policy of a slot, for the optional KL term (isolated: adapters off)."""
        if self.sharing == "isolated":
            with self.policies[slot].model.disable_adapter():
                yield self.policies[slot].model
        else:
            if not hasattr(self, "_ref"):
                self._ref = copy.deepcopy(self.base.model).eval()
            yield self._ref

    def modules(self) -> list[torch.nn.Module]:
        return list({id(p.model): p.model for p in self.policies.values()}.values())

    # ------------------------------------------------------------------ sampling
    def stream(self, max_new_tokens: int, seed: int = 0, greedy: bool = False,
               kv_cache_mb: float = 0.0) -> DecodeStream | None:
        """Continuous batching (HFSampler.stream) where one batch can hold every row: shared, or
        isolated with mixed adapters. None for full per-role copies and external engines.
        `kv_cache_mb`: cap on the saved per-agent KV caches (sampler.kv_cache_mb; 0 = no cap)."""
        if self.engine is not None or self.sharing == "isolated_full":
            return None
        return self.samplers[self.slots[0]].stream(max_new_tokens, seed, greedy, kv_cache_mb=kv_cache_mb)

    def generate(self, prompts: list[list[int]], roles: list[str], max_new_tokens: int, seed: int,
                 greedy: bool = False, row_seeds: list[int] | None = None) -> list[Sample]:
        """`row_seeds`: one sampling seed per prompt (HFSampler.generate)."""
        if self.engine is not None:  # vLLM: every slot (adapter) in one engine
            return self.engine.generate(prompts, max_new_tokens, seed, greedy,
                                        adapters=[self.slot(r) for r in roles], row_seeds=row_seeds)
        if self.sharing == "shared":
            return self.samplers["shared"].generate(prompts, max_new_tokens, seed, greedy, row_seeds=row_seeds)
        if self.sharing == "isolated":  # one batch, each row through its role's adapter
            sampler = self.samplers[self.slot(roles[0])]
            return sampler.generate(prompts, max_new_tokens, seed, greedy, adapters=[self.slot(r) for r in roles],
                                    row_seeds=row_seeds)
        out: list[Sample | None] = [None] * len(prompts)
        for k, slot in enumerate(self.slots):  # one batch per full model
            idx = [i for i, r in enumerate(roles) if self.slot(r) == slot]
            if idx:
                rs = [row_seeds[i] for i in idx] if row_seeds is not None else None
                for i, s in zip(idx, self.samplers[slot].generate([prompts[i] for i in idx], max_new_tokens,
                                                                  seed * 31 + k, greedy, row_seeds=rs)):
                    out[i] = s
        return out  # type: ignore[return-value]

    # ------------------------------------------------------------------ checkpoints
    def state_tensors(self) -> dict[str, dict[str, torch.Tensor]]:
        """Checkpoint groups: `policy` (shared), `adapter_<role>`, or `policy_<role>` (full copies)."""
        if self.sharing == "shared":
            return {"policy": self.base.model.state_dict()}
        if self.sharing == "isolated_full":
            return {f"policy_{r}": p.model.state_dict() for r, p in self.policies.items()}
        model = self.policies[self.role_types[0]].model
        return {f"adapter_{r}": {n: p.detach() for n, p in model.named_parameters() if "lora_" in n and f".{r}." in n}
                for r in self.role_types}

    def load_state_tensors(self, groups: dict[str, dict[str, torch.Tensor]], source: str) -> None:
        want = list(self.state_tensors())
        missing = [g for g in want if g not in groups]
        if missing:
            raise KeyError(f"{source}: checkpoint has no {', '.join(missing)} "
                           f"(policy.sharing={self.sharing}, roles {self.role_types}; it holds {sorted(groups)})")
        if self.sharing == "shared":
            _load(self.base.model, groups["policy"], source)
        elif self.sharing == "isolated_full":
            for r, p in self.policies.items():
                _load(p.model, groups[f"policy_{r}"], source)
        else:
            model = self.policies[self.role_types[0]].model
            params = dict(model.named_parameters())
            with torch.no_grad():
                for r in self.role_types:
                    for n, t in groups[f"adapter_{r}"].items():
                        if n not in params:
                            raise KeyError(f"{source}: adapter tensor {n} does not match the model")
                        params[n].copy_(t)


def _load(model: torch.nn.Module, sd: dict[str, torch.Tensor], source: str) -> None:
    missing, unexpected = model.load_state_dict(sd, strict=False)
    real_missing = [k for k in missing if "lm_head" not in k]  # tied embeddings are stored once
    if real_missing or unexpected:
        raise KeyError(f"{source}: weights do not match the model (missing {real_missing[:3]}, unexpected {unexpected[:3]})")
