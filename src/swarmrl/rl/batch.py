"""From rollouts to padded tensors, and token log-probs of a batch under a model.

One training sequence = one agent's whole context in one rollout (header, observations,
its own turns), so a prompt is never duplicated across turns; `gen_mask` marks the tokens
the policy generated, the only ones that get gradient (invariant 3).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from swarmrl.collective.state import Rollout
from swarmrl.rl.credit import agent_contributions, leave_one_out


@dataclass
class TrainSeq:
    ids: list[int]
    gen_mask: list[int]
    old_logp: list[float]
    advantage: float  # set by the trainer's estimator; flat over the sequence's tokens (invariant 4)
    role: str
    rollout: int
    group: int = 0  # the problem: advantages are normalised among rollouts of the same group
    multiplicity: int = 1  # agents of this role in its rollout that generated tokens
    contribution: float = 0.0  # the agent's verified contribution (rl/credit.py), for `contribution`
    leave_one_out: float = 0.0  # the agent's difference reward (rl/credit.py), for `leave_one_out`
    kl_scale: float = 1.0  # multiplies rl.kl_coef on this sequence (rl.smaller_caps_kl_scale)


def collect_sequences(rollouts: list[Rollout], task=None) -> list[TrainSeq]:
    """One sequence per agent that generated anything, in rollout then agent order. `task`: the
    run's task, so that contributions count results others used (rl/credit.py); None = the
    items each agent decided only."""
    seqs = []
    for r in rollouts:
        active = [a for a in r.agents.values() if any(a.gen_mask)]
        contrib, loo = agent_contributions(r, task), leave_one_out(r, task)
        for a in active:
            seqs.append(TrainSeq(list(a.ids), list(a.gen_mask), list(a.logprobs), 0.0, a.role, r.index, r.group,
                                 multiplicity=sum(1 for b in active if b.role == a.role),
                                 contribution=contrib[a.name], leave_one_out=loo[a.name]))
    return seqs


def micro_batches(seqs: list[TrainSeq], micro_batch_tokens: int, sort: bool = True,
                  max_pad: float = 1.0, lengths: list[int] | None = None) -> list[list[TrainSeq]]:
    """Split `seqs` into micro-batches of rows * longest <= micro_batch_tokens (padded tokens; a
    sequence longer than the budget gets a micro-batch of its own).

    `sort` (rl.length_buckets): fill them in order of length, so each holds sequences of similar
    length and padding stays small; else in the order given. `max_pad` (rl.max_pad_fraction):
    also close a micro-batch when the next sequence would make more than this share of its
    cells padding (1.0: only the token budget closes one). The loss is a weighted sum over
    sequences, so the split changes only the order of float additions (last bits). `lengths`:
    the length to pack each sequence by, where not len(ids) (what a shared prefix leaves,
    rl/prefix.py)."""
    size = {id(s): n for s, n in zip(seqs, lengths)} if lengths is not None else {id(s): len(s.ids) for s in seqs}
    order = sorted(seqs, key=lambda s: size[id(s)]) if sort else list(seqs)
    out, cur, width, real = [], [], 0, 0
    for s in order:
        n = size[id(s)]
        w = max(width, n)
        cells = (len(cur) + 1) * w
        if cur and (cells > micro_batch_tokens or 1.0 - (real + n) / cells > max_pad):
            out.append(cur)
            cur, w, real = [], n, 0
        cur.append(s)
        width, real = w, real + n
    return out + ([cur] if cur else [])


def pad_fraction(batches: list[list[TrainSeq]]) -> float:
    """Share of the padded [rows, longest] cells of `batches` that hold no token (0 = no waste)."""
    cells = sum(len(b) * max(len(s.ids) for s in b) for b in batches if b)
    real = sum(len(s.ids) for b in batches for s in b)
    return 1.0 - real / cells if cells else 0.0


def pad(seqs: list[TrainSeq], pad_id: int, device: torch.device | str | None = None) -> dict[str, torch.Tensor]:
    """Right-padded [B, T] tensors of `seqs` on `device` (the model's; built on the CPU, moved once)."""
    width = max(len(s.ids) for s in seqs)
    b = len(seqs)
    ids = torch.full((b, width), pad_id, dtype=torch.long)  # [B, T]
    attn = torch.zeros((b, width), dtype=torch.long)  # [B, T]
    mask = torch.zeros((b, width))  # [B, T]
    old = torch.zeros((b, width))  # [B, T]
    adv = torch.zeros((b, width))  # [B, T]
    for i, s in enumerate(seqs):
        n = len(s.ids)
        ids[i, :n] = torch.tensor(s.ids)
        attn[i, :n] = 1
        mask[i, :n] = torch.tensor(s.gen_mask, dtype=torch.float32)
        old[i, :n] = torch.tensor(s.old_logp)
        adv[i, :n] = s.advantage  # flat: the same value on every token of the sequence
    out = {"ids": ids, "attn": attn, "mask": mask, "old_logp": old, "adv": adv}
    return out if device is None else {k: v.to(device) for k, v in out.items()}


def token_logprobs(model, ids: torch.Tensor, attn: torch.Tensor, with_entropy: bool = True, *,
                   temperature: float = 1.0, chunk_tokens: int = 0,
                   keep: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log p_T(ids[:, t] | ids[:, <t]) for every position; position 0 gets 0.  ids, attn: [B, T].

    p_T = softmax(logits / temperature), the distribution the sampler draws from
    (policy/sampler.py `sample_tokens` divides the same float32 logits the same way), so the
    PPO ratio is exactly 1 on the policy that sampled. The entropy is that of p_T too.

    `chunk_tokens` (rl.logprob_chunk_tokens): 0 = one forward to full logits, [B, T-1, V] in
    float32 (log-softmax and its gradient double that). > 0 = run the model body once, then the
    output head, log-softmax, gather and entropy over at most `chunk_tokens` (row, position)
    pairs at a time, each chunk under activation checkpointing, so neither the forward nor the
    backward ever holds more than [chunk_tokens, V] of logits; the hidden states are all that
    autograd keeps. Same numbers up to float rounding (tests/rl/test_logprob_chunks.py).
    Models whose head is not a plain `get_output_embeddings()` module (no such method, or logit
    soft-capping / scaling in their forward) take the unchunked path.

    `keep` [B, T] (chunked path only): the positions whose log-prob is needed, e.g. the generated
    tokens a loss reads; the others skip the output head and get 0 (log-prob and entropy). The
    head and log-softmax over the vocabulary are per position, so the kept ones are unchanged
    up to float rounding, and a prompt-heavy agent context pays the head only on its replies.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 (got {temperature})")
    if chunk_tokens < 0:
        raise ValueError(f"chunk_tokens must be >= 0 (got {chunk_tokens})")
    parts = body_and_head(model) if chunk_tokens > 0 and ids.shape[1] > 1 else None
    if parts is not None:
        return _chunked_logprobs(*parts, ids, attn, with_entropy, temperature, chunk_tokens, keep)
    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float()  # [B, T-1, V]
    if temperature != 1.0:
        logits = logits / temperature  # [B, T-1, V]
    logp_all = torch.log_softmax(logits, dim=-1)  # [B, T-1, V]
    picked = logp_all.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)  # [B, T-1]
    logp = torch.cat([torch.zeros_like(picked[:, :1]), picked], dim=1)  # [B, T]
    ent = None
    if with_entropy:
        with torch.no_grad():
            e = -(logp_all.exp() * logp_all).sum(-1)  # [B, T-1]
            ent = torch.cat([torch.zeros_like(e[:, :1]), e], dim=1)  # [B, T]
    return logp, ent


LARGE_VOCABULARY = 32768  # above this, full float32 logits dominate a learner step's memory


def chunking_hint(vocab_size: int, chunk_tokens: int) -> str | None:
    """A warning for a real vocabulary trained with full logits (`rl.logprob_chunk_tokens=0`), else None."""
    if chunk_tokens > 0 or vocab_size <= LARGE_VOCABULARY:
        return None
    gb = vocab_size * 1024 * 4 / 1e9
    return (f"warning: rl.logprob_chunk_tokens=0 with a {vocab_size:,}-token vocabulary: the learner builds full "
            f"float32 logits ({gb:.1f} GB per 1,024 tokens, several times over in the backward) and runs the output "
            "head on every prompt position; rl.logprob_chunk_tokens=1024 (the recipes' value) avoids both")


# Config attributes under which a model's forward changes the logits after the head.
_HEAD_EXTRAS = ("final_logit_softcapping", "logit_scale", "output_multiplier_scale", "logits_scaling")


def body_and_head(model) -> tuple[torch.nn.Module, torch.nn.Module] | None:
    """(the decoder body returning last_hidden_state, the output head) of an HF causal LM, a
    PEFT wrapper of one included (LoRA layers live inside those modules, so the active or
    disabled adapter applies as in `model(...)`); None where that split is not known exact."""
    lm = model.get_base_model() if hasattr(model, "get_base_model") else model  # PEFT -> HF model
    get_head = getattr(lm, "get_output_embeddings", None)
    prefix = getattr(lm, "base_model_prefix", "")
    if get_head is None or not prefix or not hasattr(lm, prefix):
        return None
    head = get_head()
    body = getattr(lm, prefix)
    config = getattr(lm, "config", None)
    if head is None or body is lm or any(getattr(config, a, None) for a in _HEAD_EXTRAS):
        return None
    return body, head


def _head_logprobs(head: torch.nn.Module, h: torch.Tensor, target: torch.Tensor, temperature: float,
                   with_entropy: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """One chunk: h [N, H], target [N] -> (log p_T of target [N], entropy of p_T [N] or empty)."""
    logits = head(h).float()  # [N, V]
    if temperature != 1.0:
        logits = logits / temperature  # [N, V]
    logp_all = torch.log_softmax(logits, dim=-1)  # [N, V]
    picked = logp_all.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # [N]
    if not with_entropy:
        return picked, picked.new_zeros(0)
    with torch.no_grad():
        e = -(logp_all.exp() * logp_all).sum(-1)  # [N]
    return picked, e


def _chunked_logprobs(body, head, ids, attn, with_entropy: bool, temperature: float, chunk_tokens: int,
                      keep: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    b, t = ids.shape
    hidden = body(input_ids=ids, attention_mask=attn, use_cache=False).last_hidden_state[:, :-1]  # [B, T-1, H]
    h = hidden.reshape(b * (t - 1), hidden.shape[-1])  # [N, H], N = B (T-1)
    rows = keep[:, 1:].reshape(-1).bool() if keep is not None else None  # [N]
    p, e = head_logprobs(head, h, ids[:, 1:].reshape(-1), temperature, with_entropy, chunk_tokens, rows)  # [N]
    p = p.reshape(b, t - 1)  # [B, T-1]
    logp = torch.cat([torch.zeros_like(p[:, :1]), p], dim=1)  # [B, T]
    ent = None
    if with_entropy:
        e = e.reshape(b, t - 1).detach()  # [B, T-1]
        ent = torch.cat([torch.zeros_like(e[:, :1]), e], dim=1)  # [B, T]
    return logp, ent


def head_logprobs(head: torch.nn.Module, h: torch.Tensor, target: torch.Tensor, temperature: float,
                  with_entropy: bool, chunk_tokens: int = 0,
                  keep: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """h [N, H], target [N] -> (log p_T of target [N], entropy [N] or empty): all at once, or
    over `chunk_tokens` rows at a time, each chunk recomputed in the backward. With chunks,
    `keep` [N] bool limits the head to those rows (0 elsewhere)."""
    if chunk_tokens <= 0:
        return _head_logprobs(head, h, target, temperature, with_entropy)
    if keep is not None:
        rows = keep.nonzero().squeeze(1)  # [K]
        p, e = head_logprobs(head, h.index_select(0, rows), target.index_select(0, rows), temperature,
                             with_entropy, chunk_tokens)  # [K]
        full = p.new_zeros(h.shape[0]).index_copy(0, rows, p)  # [N]
        return full, (e.new_zeros(h.shape[0]).index_copy(0, rows, e) if with_entropy else e)
    from torch.utils.checkpoint import checkpoint

    if h.shape[0] == 0:  # nothing kept: empty results that still hang off the graph
        return h[:, 0].float(), h.new_zeros(0, dtype=torch.float32)
    recompute = torch.is_grad_enabled() and h.requires_grad
    picked, ents = [], []
    for s in range(0, h.shape[0], chunk_tokens):
        args = (head, h[s:s + chunk_tokens], target[s:s + chunk_tokens], temperature, with_entropy)
        p, e = checkpoint(_head_logprobs, *args, use_reentrant=False) if recompute else _head_logprobs(*args)
        picked.append(p)
        ents.append(e)
    return torch.cat(picked), torch.cat(ents)
