"""Model factory: every policy is a Hugging Face causal LM.

The default is a tiny Qwen3-architecture model built from the sizes in the config; a
real model loads by hub name or local path through the same `load_policy` code.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import (AutoModelForCausalLM, AutoTokenizer, PreTrainedModel,
                          PreTrainedTokenizerBase, Qwen3Config, Qwen3ForCausalLM)

from swarmrl.config import ModelConfig
from swarmrl.policy.chat import turn_end_id
from swarmrl.policy.tokenizer import build_tokenizer
from swarmrl.runs.manifest import (POLICY_MANIFEST, CheckpointError, read_json, verify_files,
                                   write_dir_atomically, write_with_manifest)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
SMALL_MODEL_BYTES = 256 * 2**20
"""Below this many bytes of weights a model loads and saves in well under a second: no progress bars."""


@dataclass
class Policy:
    """A model with its tokenizer and the ids the runtime needs."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    pad_id: int
    stop_id: int | None = None  # a stop token chosen by hand (tests); None: the tokenizer's

    @property
    def end_id(self) -> int:
        """The token that ends an agent turn: read from the tokenizer each time, because
        `model.chat_template` may install a template after loading (policy/chat.py)."""
        return self.stop_id if self.stop_id is not None else turn_end_id(self.tokenizer)


def _wrap(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> Policy:
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else turn_end_id(tokenizer)
    return Policy(model=model, tokenizer=tokenizer, pad_id=int(pad))


def build_tiny_policy(cfg: ModelConfig, seed: int = 0) -> Policy:
    tokenizer = build_tokenizer()
    qcfg = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        head_dim=cfg.hidden_size // cfg.num_heads,
        intermediate_size=cfg.intermediate_size,
        max_position_embeddings=cfg.max_context_tokens,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(qcfg).to(DTYPES[cfg.dtype])
    return _wrap(model, tokenizer)


class ModelLoadError(ValueError):
    """A local model directory exists but cannot be loaded (corrupt or incomplete files)."""


def load_policy(name_or_path: str | Path, dtype: str = "float32") -> Policy:
    """Load a saved swarmrl policy, a local HF model directory, or a hub id (if reachable)."""
    local = Path(name_or_path).is_dir()
    nbytes = sum(f.stat().st_size for f in Path(name_or_path).glob("*.safetensors")) if local else None
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(name_or_path))
        with _bars_if_large(nbytes):
            model = AutoModelForCausalLM.from_pretrained(str(name_or_path), dtype=DTYPES[dtype])
    except Exception as e:
        # Libraries report a damaged file as OSError, ValueError, JSON or safetensors errors;
        # one type that names the directory lets callers (and the CLI) report it plainly.
        if local:
            raise ModelLoadError(f"cannot load model directory {name_or_path}: corrupt or incomplete "
                                 f"({e.__class__.__name__}: {e})") from e
        if isinstance(e, OSError):
            raise FileNotFoundError(
                f"cannot load model '{name_or_path}': not a local model directory and the hub is "
                f"not reachable from here ({e.__class__.__name__})") from e
        raise
    rows = model.get_input_embeddings().num_embeddings
    if len(tokenizer) > rows:  # ids past the embedding would index out of range mid-rollout
        raise ModelLoadError(f"{name_or_path}: the tokenizer has {len(tokenizer)} tokens but the model's embedding "
                             f"has {rows} rows: tokenizer and weights do not belong together")
    return _wrap(model, tokenizer)


def save_policy(policy: Policy, path: str | Path) -> None:
    """Weights (safetensors), config and tokenizer side by side: a loadable HF directory."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    with _bars_if_large(sum(p.numel() * p.element_size() for p in policy.model.parameters())):
        policy.model.save_pretrained(path, safe_serialization=True)
    policy.tokenizer.save_pretrained(path)


@contextmanager
def _bars_if_large(nbytes: int | None):
    """transformers' progress bars only for weights of at least SMALL_MODEL_BYTES (None: unknown,
    a hub download): the tiny model's bars, one per load and save on every rank, would bury the
    run's own progress lines while measuring nothing."""
    from transformers.utils import logging as hf_logging
    quiet = nbytes is not None and nbytes < SMALL_MODEL_BYTES and hf_logging.is_progress_bar_enabled()
    if quiet:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if quiet:
            hf_logging.enable_progress_bar()


def stage_run_policy(policy: Policy, path: Path, step: int | None = None) -> None:
    """Write the policy with its manifest into the new, private directory `path`."""
    Path(path).mkdir(parents=True)
    write_with_manifest(Path(path), lambda d: save_policy(policy, d), POLICY_MANIFEST, {"step": step})


def save_run_policy(policy: Policy, path: Path, step: int | None = None) -> Path:
    """save_policy for a run's model/ and final/: atomic (temp dir + rename), with a sha256
    manifest that `load_run_policy` verifies, and the training step it holds."""
    return write_dir_atomically(Path(path), lambda d: save_policy(policy, d), POLICY_MANIFEST,
                                {"step": step})


def verify_run_policy(path: Path) -> dict:
    """Check a run policy directory against its manifest; return the manifest."""
    mpath = Path(path) / POLICY_MANIFEST
    if not mpath.is_file():
        what = "directory not found" if not Path(path).is_dir() else f"{POLICY_MANIFEST} missing"
        raise CheckpointError(f"unverifiable model directory {path}: {what}")
    manifest = read_json(mpath, "model")
    verify_files(Path(path), manifest, mpath, "model")
    return manifest


def load_run_policy(path: Path, dtype: str = "float32") -> Policy:
    verify_run_policy(path)
    return load_policy(path, dtype)
