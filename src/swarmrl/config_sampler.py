"""The `sampler` section of the config (its own module to keep config_schema.py short): one
docstring per field.

Imports nothing from swarmrl: config_schema.py imports the class and re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass
class SamplerConfig:
    engine: Literal["hf", "vllm"] = "hf"
    """Generation engine. `hf`: swarmrl's own batched decode loop on transformers (CPU or GPU).
    `vllm`: vLLM (the optional `vllm` extra, CUDA only): batched generation with prefix caching
    and multi-LoRA serving, so every role's adapter samples in one engine (policy/vllm_engine.py)."""
    temperature: float = 1.0
    """Sampling temperature for rollouts (1.0 keeps behaviour log-probs exact)."""
    max_new_tokens_per_turn: int = 64
    """Token cap of one agent turn; a turn that hits it is cut and counted as invalid."""
    max_turns_per_agent: int = 12
    """Turns one agent may take in a rollout (stops loops)."""
    batching: Literal["continuous", "waves"] = "continuous"
    """`continuous`: a rollout's next causal wave joins the running decode batch as soon as its
    own turns are back. `waves`: one sampler call per global wave (every rollout waits for the
    slowest turn). Both sample the same turns (per-turn seeds); `hf` engine only."""
    prefix_cache: bool = True
    """Keep each agent's KV cache between its turns so that its next prompt runs only the new
    tokens (continuous batching only). Costs memory: every agent's context of the rollouts in
    flight stays cached."""
    share_prompts: bool = True
    """Keep the KV cache of each prompt the sampler prefills, so that a later prompt starting with
    the same tokens (at least 16: the same header and problem in another rollout of the group)
    runs only its remainder (`hf` engine; policy/prompt_pool.py). Logits equal a full prefill's
    up to float rounding. Costs memory within one rollout batch, under `kv_cache_mb`."""
    batched_adapters: bool = True
    """Isolated LoRA policies: each LoRA layer runs every adapter's A at once and keeps each row's
    own (a mask), instead of PEFT's loop over the adapters (`hf` engine; policy/lora_batch.py).
    Logits equal PEFT's up to float rounding; false keeps PEFT's own loop."""
    draft_tokens: int = 3
    """Guessed tokens a decode call verifies per row after its newest token (`hf` engine,
    continuous batching, full attention; policy/speculative.py). The guesses come from what
    followed the same recent tokens in the previous RL step's turns and the stream's finished
    ones; every token is still drawn from the model, so the tokens are those of 0 up to float
    rounding (a call over several columns rounds differently), in 2-3x fewer decode calls (2 CPU
    cores: one rank's share of the demo's rollouts in 0.85x the time; benchmarks/draft_tokens.py). The previous
    step's turns are in every checkpoint, so a resumed run still equals a straight one to the
    bit. 0 = one token per call."""
    kv_cache_mb: float = 1024.0
    """Cap, in MiB, on the KV caches kept between turns: saved per-agent caches (`prefix_cache`)
    and shared prompts (`share_prompts`). Over the cap, shared prompts go first, then finished
    agents' caches, then the least recently used; a dropped cache's prompt is prefilled in full
    (same tokens up to float rounding, more compute). 0 = no cap."""
