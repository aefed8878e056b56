"""Learner -> sampling engine weight sync: one interface (`WeightSync.push`), one name mapping.

`WeightSync.push(groups, version)` takes `PolicySet.state_tensors()` groups and decides what the
engine receives; the engine side (`EngineSide`) is four calls, small enough to fake in a test
(tests/policy/test_weight_sync.py) and implemented for vLLM in policy/vllm_engine.py:

- `policy` (sharing=shared): the full weights, once each (a tied `lm_head.weight` is the
  embedding: dropped, the engine ties it itself), cast to the engine's dtype, in the model's
  state_dict order -> `load_full(named, version)`, then `reset_prefix_cache()` (cached KV
  blocks were computed by the old weights).
- `adapter_<role>` (sharing=isolated): one LoRA adapter per role, its tensors renamed from the
  live PEFT names to PEFT's saved-adapter format (what vLLM reads from an adapter directory):
  `...q_proj.lora_A.<role>.weight` -> `...q_proj.lora_A.weight`, the `base_model.model.` prefix
  kept. Every update registers each role's adapter under a new name and a new integer id
  (vLLM caches adapters by id), then removes the previous version's adapters; the base model
  is never pushed.
- `policy_<role>` (sharing=isolated_full): refused (one engine serves one base model).

Versions only go forward: the same version again is a no-op, an older one is refused unless
the caller says it rewinds on purpose (`rewind=True`: a Ray rollout worker that replaces a dead
one re-runs an older shard with that shard's weights after newer ones, distributed/worker.py).
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import torch

Groups = dict[str, dict[str, torch.Tensor]]

PEFT_PREFIX = "base_model.model."  # PEFT's wrapper prefix, kept in saved adapters (vLLM strips it)
LORA_KINDS = ("lora_A", "lora_B")
TIED_HEAD, EMBEDDING = "lm_head.weight", "model.embed_tokens.weight"


class WeightSyncError(ValueError):
    """The learner's weights cannot be handed to the engine as they are (mode, names, version)."""


@dataclasses.dataclass(frozen=True)
class LoraAdapter:
    """One role's adapter at one version, as the engine registers it."""

    role: str
    version: int
    lora_id: int  # new for every update: vLLM caches adapters by integer id
    tensors: dict[str, torch.Tensor]  # engine names (PEFT's saved format)
    config: dict  # adapter_config.json (PEFT's LoraConfig as saved)

    @property
    def name(self) -> str:
        """Unique per registration (a rewind may register the same version twice)."""
        return f"{self.role}-v{self.version}-id{self.lora_id}"


class EngineSide(Protocol):
    """What a sampling engine must do to take new weights."""

    def load_full(self, named: list[tuple[str, torch.Tensor]], version: int) -> None:
        """Load full model weights in place."""

    def add_lora(self, adapter: LoraAdapter) -> None:
        """Register an adapter (served for requests that name it)."""

    def remove_lora(self, adapter: LoraAdapter) -> None:
        """Forget an adapter registered earlier."""

    def reset_prefix_cache(self) -> None:
        """Drop cached KV blocks (computed by weights that are gone)."""


def engine_lora_name(name: str, adapter: str) -> str:
    """A live PEFT LoRA parameter name -> the name in a saved adapter file (what vLLM loads).
    `base_model.model.model.layers.0.self_attn.q_proj.lora_A.generator.weight`
      -> `base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight`."""
    if not name.startswith(PEFT_PREFIX):
        raise WeightSyncError(f"adapter '{adapter}': tensor {name} lacks PEFT's '{PEFT_PREFIX}' prefix")
    for kind in LORA_KINDS:
        marker = f".{kind}.{adapter}."
        if marker in name:
            return name.replace(marker, f".{kind}.", 1)
    raise WeightSyncError(f"adapter '{adapter}': tensor {name} is not a LoRA A/B weight of that adapter "
                          f"(the engine serves {'/'.join(LORA_KINDS)} only)")


def engine_full_weights(sd: dict[str, torch.Tensor], dtype: torch.dtype | None = None
                        ) -> list[tuple[str, torch.Tensor]]:
    """A full state_dict -> what the engine loads: HF names, a tied head left out, PEFT's
    `.base_layer.` wrapping and adapters removed, detached (and cast to `dtype`)."""
    tied = (TIED_HEAD in sd and EMBEDDING in sd
            and sd[TIED_HEAD].data_ptr() == sd[EMBEDDING].data_ptr())
    out = []
    for k, v in sd.items():
        if "lora_" in k or (tied and k == TIED_HEAD):
            continue
        v = v.detach()
        out.append((k.replace(".base_layer.", "."), v.to(dtype) if dtype is not None else v))
    return out


def lora_config_dict(peft_config) -> dict:
    """A PEFT LoraConfig as adapter_config.json holds it (PeftConfig.save_pretrained: sets -> lists)."""
    d = peft_config.to_dict()
    return {k: sorted(v) if isinstance(v, set) else v for k, v in d.items()}


class WeightSync:
    """Hands `PolicySet.state_tensors()` groups to an `EngineSide`, version by version."""

    def __init__(self, engine: EngineSide, lora_configs: dict[str, dict] | None = None,
                 dtype: torch.dtype | None = None):
        self.engine, self.lora_configs, self.dtype = engine, lora_configs, dtype
        self.version = -1
        self.adapters: dict[str, LoraAdapter] = {}  # role -> the adapter the engine serves now
        self._next_id = 1

    @classmethod
    def for_policies(cls, policies, engine: EngineSide, dtype: torch.dtype | None = None) -> "WeightSync":
        """The sync of a PolicySet: its adapters' LoRA configs when sharing=isolated."""
        if not policies.one_model:
            raise WeightSyncError(_ISOLATED_FULL)
        configs = None
        if policies.adapters:
            model = policies.policies[policies.role_types[0]].model
            configs = {r: lora_config_dict(model.peft_config[r]) for r in policies.role_types}
        return cls(engine, configs, dtype)

    def push(self, groups: Groups, version: int, rewind: bool = False) -> None:
        """Hand `groups` (PolicySet.state_tensors) at `version` to the engine; `rewind`: an older
        version is meant (otherwise refused)."""
        if version == self.version:
            return
        if version < self.version and not rewind:
            raise WeightSyncError(f"weights of version {version} arrived after version {self.version}: "
                                  "the engine only moves forward (a stale learner or a restarted run); "
                                  "pass rewind=True where an older version is meant")
        full = [g for g in groups if g.startswith("policy_")]
        if full:
            raise WeightSyncError(_ISOLATED_FULL + f" (got groups {sorted(groups)})")
        if self.lora_configs is not None:
            self._push_adapters(groups, version)
        else:
            if set(groups) != {"policy"}:
                raise WeightSyncError(f"a shared policy syncs one group 'policy'; got {sorted(groups)}")
            self.engine.load_full(engine_full_weights(groups["policy"], self.dtype), version)
            self.engine.reset_prefix_cache()
        self.version = version

    def _push_adapters(self, groups: Groups, version: int) -> None:
        roles = list(self.lora_configs)
        want = {f"adapter_{r}" for r in roles}
        if set(groups) != want:
            raise WeightSyncError(f"per-role adapters sync groups {sorted(want)}; got {sorted(groups)}")
        new = {}
        for r in roles:  # build (and check) every adapter before the engine sees any
            tensors = {engine_lora_name(n, r): t.detach().to(self.dtype) if self.dtype else t.detach()
                       for n, t in groups[f"adapter_{r}"].items()}
            if not tensors:
                raise WeightSyncError(f"adapter '{r}' has no LoRA tensors")
            new[r] = LoraAdapter(r, version, self._next_id, tensors, self.lora_configs[r])
            self._next_id += 1
        for a in new.values():
            self.engine.add_lora(a)
        old, self.adapters = self.adapters, new
        for a in old.values():  # after the new ones: a role is never without an adapter
            self.engine.remove_lora(a)


_ISOLATED_FULL = ("sampler.engine=vllm cannot serve policy.sharing=isolated_full (one full model per role); "
                  "use policy.sharing=isolated (per-role LoRA adapters, served together) or sampler.engine=hf")
