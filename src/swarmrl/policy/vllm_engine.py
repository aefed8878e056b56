"""vLLM as the GPU sampling engine, behind the HFSampler interface (`sampler.engine: vllm`).

What it adds over policy/sampler.py on a GPU: continuous batching, prefix caching (an agent's
context grows by one observation and one reply per turn: every turn re-sends a prompt whose
prefix the engine has already computed), and multi-LoRA serving: under `policy.sharing:
isolated` every role's adapter is served by one engine, each request naming its adapter,
so all roles sample in one batch as they do in the HF sampler.

Weight updates from the learner: adapters (isolated) are written as PEFT directories and
registered under a new LoRA id per version (vLLM caches adapters by id); a shared policy's
full weights are loaded into the engine's model in place.

vllm is imported lazily (an optional extra; CUDA only). `check_engine` runs before training
starts and names what is wrong: no GPU, vllm not installed, or an adapter vLLM cannot serve.
Written against vLLM 0.10-0.11; it cannot be exercised on a CPU-only machine (its tests are
marked `gpu`; benchmarks/gpu_check.sh runs it end to end).
"""

from __future__ import annotations

import gc
import shutil
import tempfile
from pathlib import Path

import torch

from swarmrl.config import ConfigError
from swarmrl.policy.sampler import Sample
from swarmrl.policy.sharing import policy_class
from swarmrl.seeds import seed_for

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
    try:
        import vllm  # noqa: F401
    except ImportError as e:
        raise ConfigError("sampler.engine=vllm needs the vllm extra: pip install -e '.[vllm]' "
                          f"({type(e).__name__}: {e})") from e


def _clean_base_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The base model's weights without PEFT's wrapping (`.base_layer.`) and without adapters."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return {k.replace(".base_layer.", "."): v for k, v in base.state_dict().items() if "lora_" not in k}


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
        kwargs = dict(model=str(self.dir / "base"), enable_prefix_caching=True, seed=cfg.seed,
                      max_model_len=cfg.model.max_context_tokens, gpu_memory_utilization=0.4,
                      enforce_eager=True,
                      # vLLM's GPU attention kernels want half precision; the learner's PPO ratio
                      # absorbs the small float32-vs-bfloat16 gap in the behaviour log-probs.
                      dtype="bfloat16" if cfg.model.dtype == "float32" else cfg.model.dtype)
        if self.lora:
            kwargs.update(enable_lora=True, max_loras=len(policies.role_types), max_lora_rank=max(cfg.policy.lora_rank, 8))
        try:  # behaviour log-probs must be those of the distribution sampled from (after temperature)
            self.llm = LLM(logprobs_mode="processed_logprobs", **kwargs)
        except TypeError:  # older vLLM: raw log-probs; exact only at temperature 1
            self.llm = LLM(**kwargs)
        self.version, self.requests = -1, {}
        self._next_lora_id = 1

    # ---------------------------------------------------------------- weights
    def load_weights(self, tensors: dict[str, dict[str, torch.Tensor]], version: int) -> None:
        """The learner's trainable weights (PolicySet.state_tensors groups) at `version`."""
        if version == self.version:
            return
        if self.lora:
            from vllm.lora.request import LoRARequest
            path = self.dir / f"v{version}"
            model = self.policies.policies[self.policies.role_types[0]].model
            model.save_pretrained(path, selected_adapters=list(self.policies.role_types))
            old = self.requests
            self.requests = {}
            for role in self.policies.role_types:  # PEFT writes a named adapter into its own subfolder
                sub = path / role if (path / role).exists() else path
                self.requests[role] = LoRARequest(f"{role}-v{version}", self._next_lora_id, str(sub))
                self._next_lora_id += 1
            for req in old.values():  # vLLM caches adapters by id: drop the stale ones
                self.llm.llm_engine.remove_lora(req.lora_int_id)
            shutil.rmtree(self.dir / f"v{self.version}", ignore_errors=True)
        else:
            (sd,) = tensors.values()
            weights = [(k, v.detach().to("cuda")) for k, v in sd.items()]
            self.llm.collective_rpc(_load_weights_rpc, args=(weights,))
            self.llm.reset_prefix_cache()  # cached KV blocks were computed by the old weights
        self.version = version

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


def _load_weights_rpc(worker, weights) -> None:
    """Runs inside vLLM's worker: load full weights in place (shared policy)."""
    worker.model_runner.model.load_weights(weights=weights)
