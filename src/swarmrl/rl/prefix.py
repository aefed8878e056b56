"""Shared prompt prefixes in the learner (rl.share_prefixes).

Many training sequences start with the same prompt tokens: every rollout of a group shows an
agent the same header and problem (and, where a protocol puts the problem first, so does
every agent of a rollout). The learner runs each distinct prefix through the model once per
update call (`SharedPrefixes`); every sequence's remainder then attends to its prefix's keys
and values, with the position ids and attention mask of the whole sequence. So every logit is
the one a full forward gives, up to float rounding (the kernels see other shapes).

The gradient: the prefixes' keys and values enter the remainders' forwards as leaf tensors;
each micro-batch's backward adds into their .grad, and `SharedPrefixes.backward` sends that
through the prefix forward once, after the last micro-batch. The prefixes' activations live
until then: one forward of the distinct prefixes, far less than the sequences they replace.

Only prompt tokens are shared: a prefix ends at least two tokens before a sequence's first
generated token, so every log-prob a loss reads comes out of a remainder's forward.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from swarmrl.policy.device import checkpointing_on
from swarmrl.policy.kvcache import attention_layout, cache_keyword
from swarmrl.policy.prompt_pool import common_prefix
from swarmrl.rl.batch import TrainSeq, body_and_head, head_logprobs

MIN_SHARED = 16  # a shorter common prefix is not worth the bookkeeping


def prefix_lengths(seqs: list[TrainSeq], min_len: int = MIN_SHARED) -> list[int]:
    """Per sequence, how many leading tokens it shares with others (0 = none): sequences sorted
    by their prompt are joined while they keep at least `min_len` tokens in common, and each
    cluster shares its members' longest common prompt prefix."""
    return prefix_clusters(seqs, min_len)[1]


def prefix_clusters(seqs: list[TrainSeq], min_len: int = MIN_SHARED) -> tuple[list[int], list[int]]:
    """(cluster index, shared length) per sequence, as `prefix_lengths` forms the clusters: a
    sequence that shares nothing is a cluster of its own, with length 0."""
    limit = [_prompt_limit(s) for s in seqs]
    order = sorted(range(len(seqs)), key=lambda i: seqs[i].ids[:limit[i]])
    label, out = [0] * len(seqs), [0] * len(seqs)
    cluster: list[int] = []
    common, n = 0, 0
    for i in order + [None]:
        if i is not None and cluster:
            lcp = common_prefix(seqs[cluster[0]].ids, seqs[i].ids, min(common, limit[i]))
            if lcp >= min_len:
                cluster.append(i)
                common = lcp
                continue
        for j in cluster:
            label[j], out[j] = n, common if len(cluster) > 1 else 0
        n += bool(cluster)
        if i is not None:
            cluster, common = [i], limit[i]
    return label, out


def _prompt_limit(s: TrainSeq) -> int:
    """The longest prefix the sequence may share: it stops one token before the token whose
    logits predict the first generated token, so a remainder's forward yields that logit."""
    first = next((t for t, g in enumerate(s.gen_mask) if g), len(s.ids))
    return max(first - 1, 0)


def can_share(model) -> bool:
    """The model splits into a decoder body and a plain output head (see `body_and_head`), every
    layer attends to the whole past (a sliding window's cache would cut the prefix), and no layer
    recomputes its activations: transformers fills no cache under gradient checkpointing in
    training, so the prefixes' keys and values would never be written."""
    if checkpointing_on(model):
        return False
    try:
        return body_and_head(model) is not None and attention_layout(model) == "full"
    except Exception:  # not attention layers at all: the plain forward
        return False


class SharedPrefixes:
    """The keys and values of the distinct prefixes `seqs[i].ids[:cut[i]]` under `model`, run
    once (in chunks of at most `chunk_cells` padded tokens). Under grad the remainders read
    leaf copies; call `backward()` after their backward passes."""

    def __init__(self, model, seqs: list[TrainSeq], cut: list[int], pad_id: int, device, chunk_cells: int):
        keys = sorted({tuple(s.ids[:c]) for s, c in zip(seqs, cut) if c})
        self.slot = {k: u for u, k in enumerate(keys)}
        self.p_max = max(len(k) for k in keys)
        self.cells = {"cells": float(len(keys) * self.p_max), "real": float(sum(len(k) for k in keys))}
        body, _ = body_and_head(model)
        rows = max(1, chunk_cells // self.p_max)
        parts = []  # per chunk: per layer (keys, values) [u, kv_heads, P, head_dim]
        for start in range(0, len(keys), rows):
            chunk = keys[start:start + rows]
            ids = torch.full((len(chunk), self.p_max), pad_id, dtype=torch.long)  # [u, P]
            attn = torch.zeros((len(chunk), self.p_max), dtype=torch.long)  # [u, P]
            for r, k in enumerate(chunk):
                ids[r, :len(k)] = torch.tensor(k)
                attn[r, :len(k)] = 1
            cache = DynamicCache()
            body(input_ids=ids.to(device), attention_mask=attn.to(device), use_cache=True, **{cache_keyword(body): cache})
            if not cache.layers or getattr(cache.layers[0], "keys", None) is None:
                raise RuntimeError("shared prefixes: the model's forward filled no key/value cache "
                                   "(run with rl.share_prefixes=false)")
            parts.append([(layer.keys, layer.values) for layer in cache.layers])
        self.outputs = [(torch.cat([p[i][0] for p in parts]), torch.cat([p[i][1] for p in parts]))
                        for i in range(len(parts[0]))]  # per layer [U, kv_heads, P, head_dim]
        grad = torch.is_grad_enabled() and self.outputs[0][0].requires_grad
        self.leaves = ([(k.detach().requires_grad_(), v.detach().requires_grad_()) for k, v in self.outputs]
                       if grad else self.outputs)

    def cache_for(self, seqs: list[TrainSeq], cut: list[int]) -> DynamicCache:
        """A cache whose row b holds the keys/values of seqs[b]'s prefix (any prefix's where it
        has none: its mask hides them)."""
        idx = torch.tensor([self.slot.get(tuple(s.ids[:c]), 0) for s, c in zip(seqs, cut)],
                           device=self.leaves[0][0].device)  # [B]
        return DynamicCache(ddp_cache_data=[(k.index_select(0, idx), v.index_select(0, idx)) for k, v in self.leaves])

    def backward(self) -> None:
        """Send the gradient the remainders left on the leaves through the prefix forward."""
        pairs = [(out, leaf.grad) for outs, leaves in zip(self.outputs, self.leaves)
                 for out, leaf in zip(outs, leaves) if leaf is not out and leaf.grad is not None]
        if pairs:
            torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])


def shared_logprobs(model, seqs: list[TrainSeq], cut: list[int], prefixes: SharedPrefixes, pad_id: int, device,
                    with_entropy: bool, *, temperature: float = 1.0, chunk_tokens: int = 0,
                    keep: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None, dict[str, float]]:
    """`token_logprobs` of the right-padded batch of `seqs` (the same [B, T] layout), each
    sequence's first cut[i] tokens read from `prefixes`. Returns (logp [B, T], entropy [B, T]
    or None, {"cells": padded cells computed, "real": tokens in them}). `chunk_tokens` and
    `keep` [B, T]: as in `token_logprobs`."""
    body, head = body_and_head(model)
    b, width, p_max = len(seqs), max(len(s.ids) for s in seqs), prefixes.p_max
    rest = [s.ids[c:] for s, c in zip(seqs, cut)]
    s_max = max(len(r) for r in rest)
    ids = torch.full((b, s_max), pad_id, dtype=torch.long)  # [B, S] remainders, right padded
    attn = torch.zeros((b, p_max + s_max), dtype=torch.long)  # [B, P + S]: prefix columns, then remainder
    pos = torch.zeros((b, s_max), dtype=torch.long)  # [B, S] positions in the whole sequence
    for i, c in enumerate(cut):
        ids[i, :len(rest[i])] = torch.tensor(rest[i])
        attn[i, :c] = 1
        attn[i, p_max:p_max + len(rest[i])] = 1
        pos[i] = torch.arange(c, c + s_max)
    ids = ids.to(device)
    hidden = body(input_ids=ids, attention_mask=attn.to(device), position_ids=pos.to(device), use_cache=True,
                  **{cache_keyword(body): prefixes.cache_for(seqs, cut)}).last_hidden_state  # [B, S, H]
    h = hidden[:, :-1].reshape(b * (s_max - 1), hidden.shape[-1])  # [N, H], N = B (S-1)
    c = torch.tensor(cut, device=ids.device).unsqueeze(1)  # [B, 1]
    lens = torch.tensor([len(r) for r in rest], device=ids.device).unsqueeze(1)  # [B, 1]
    rows = _remainder_keep(keep, c, lens, s_max) if keep is not None else None  # [N]
    picked, ent = head_logprobs(head, h, ids[:, 1:].reshape(-1), temperature, with_entropy, chunk_tokens, rows)  # [N]

    # Back to the whole sequence: remainder logit j predicts remainder token j + 1, which sits at
    # position cut + j + 1; positions up to the cut are prompt and get 0, as position 0 does.
    j = torch.arange(width, device=ids.device).unsqueeze(0) - c - 1  # [B, T] the logit predicting t
    valid = (j >= 0) & (j < lens - 1)  # [B, T]
    idx = j.clamp(0, max(s_max - 2, 0))  # [B, T]
    zero = torch.zeros((), device=ids.device)
    logp = torch.where(valid, picked.reshape(b, s_max - 1).gather(1, idx), zero)  # [B, T]
    entropy = torch.where(valid, ent.reshape(b, s_max - 1).gather(1, idx), zero) if with_entropy else None
    return logp, entropy, {"cells": float(b * s_max), "real": float(sum(len(r) for r in rest))}


def _remainder_keep(keep: torch.Tensor, c: torch.Tensor, lens: torch.Tensor, s_max: int) -> torch.Tensor:
    """keep [B, T] over whole-sequence positions -> [B (S-1)] over remainder logits: logit j of
    row i predicts position c_i + j + 1 (c [B, 1] cuts, lens [B, 1] remainder lengths)."""
    keep = keep.to(c.device).bool()
    j = torch.arange(s_max - 1, device=c.device).unsqueeze(0)  # [1, S-1]
    target = c + j + 1  # [B, S-1] the whole-sequence position each logit predicts
    inside = j < lens - 1  # [B, S-1]
    picked = keep.gather(1, target.clamp(max=keep.shape[1] - 1))  # [B, S-1]
    return (picked & inside).reshape(-1)
