"""Draft tokens for the sampler's decode loop (sampler.draft_tokens): more than one token per call.

Why: a decode call of a small model costs about the same for one new column per row as for
five (it is bound by the call's fixed cost and by reading the KV cache, not by arithmetic), and
agent turns repeat themselves: tags, item labels, the CEO's hiring lines, the board's takes,
across every agent of every rollout. A table of what followed each recent context in the turns
already finished (`NgramDrafter`, built while sampling, as in suffix decoding) guesses the next
few tokens of a row; one call computes the logits after each guessed token, and the row keeps
every guess the sampler itself draws.

Exact in distribution, not a heuristic on the output: at every position the sampler draws the
token from the model's logits given the tokens before it, exactly as without drafts; a draft
only decides how many positions one call may fill. A row continues past position j only when
the token it drew there equals the draft, so the logits at j + 1 are those of the true
context. Each row draws its sampling noise in the same order as without drafts (one draw per
emitted token from its own generator), so with row seeds the tokens are the same as without
drafts up to float rounding: a call over several columns rounds the logits differently from a
call over one (about 1e-6 relative), which can flip a draw sitting on a boundary.

Where the table comes from: each stream starts from a corpus, the previous RL step's turns
(`draft_corpus`: every rollout's generated spans, in rollout order, which every backend and rank
holds after a step and a checkpoint stores), and learns from its own turns as they finish. So
the guesses, and with them the float rounding, are a function of the run's state: a resumed run
samples what a straight one does, to the bit.

The columns of rejected drafts stay in the KV cache as holes (masked out, like padding), so
positions run per row, not per column; that is exact for full attention only (kvcache.py
`attention_layout`), and DecodeStream drafts nothing under a sliding window.
"""

from __future__ import annotations

import torch

from swarmrl.policy.sampling import sample_tokens

MAX_CONTEXT = 8  # longest context (tokens) the table matches; measured: 8 beats 4 by ~0.3 tokens a call
MAX_ENTRIES = 1 << 20  # contexts kept before the table starts afresh (memory bound, ~150 MB of tuples)


class NgramDrafter:
    """Next-token table over the contexts of up to MAX_CONTEXT tokens seen in finished turns.

    `draft(context, k)` follows the most frequent continuation of the longest context the table
    knows, up to k tokens. One table serves every row and every adapter: a draft is only a guess,
    and a wrong one costs a column, never a token."""

    def __init__(self, max_context: int = MAX_CONTEXT, max_entries: int = MAX_ENTRIES):
        self.n, self.max_entries = max_context, max_entries
        self.table: dict[tuple, list] = {}  # context -> [counts {token: n}, most frequent token]

    @classmethod
    def from_corpus(cls, corpus: list[tuple[list[int], int]]) -> "NgramDrafter":
        """A table that has observed each (tokens, count) of `corpus`, in order."""
        d = cls()
        for tokens, count in corpus:
            d.observe(tokens, count)
        return d

    def observe(self, tokens: list[int], count: int = 1) -> None:
        """Count what followed each context of `tokens` (a finished turn, led by a few prompt
        tokens), `count` times."""
        if len(self.table) > self.max_entries:
            self.table.clear()
        for i in range(1, len(tokens)):
            nxt = tokens[i]
            for m in range(1, min(self.n, i) + 1):
                entry = self.table.get(key := tuple(tokens[i - m:i]))
                if entry is None:
                    self.table[key] = [{nxt: count}, nxt]
                    continue
                counts = entry[0]
                counts[nxt] = counts.get(nxt, 0) + count
                if counts[nxt] > counts[entry[1]]:
                    entry[1] = nxt

    def draft(self, context: list[int], k: int) -> list[int]:
        """Up to k guessed tokens after `context` (only its last MAX_CONTEXT tokens are read)."""
        ctx, out = list(context[-self.n:]), []
        while len(out) < k:
            nxt = self._next(ctx)
            if nxt is None:
                break
            out.append(nxt)
            ctx = ctx[1:] + [nxt] if len(ctx) >= self.n else ctx + [nxt]
        return out

    def _next(self, ctx: list[int]) -> int | None:
        for m in range(min(self.n, len(ctx)), 0, -1):
            entry = self.table.get(tuple(ctx[-m:]))
            if entry is not None:
                return entry[1]
        return None


def draft_corpus(rollouts: list) -> list[tuple[list[int], int]]:
    """The generated spans of `rollouts` (each led by the MAX_CONTEXT tokens before it), in rollout
    order, then agent and turn order, identical spans merged with their count (first place kept):
    what a stream's table starts from. [(tokens, count)]"""
    counts: dict[tuple, int] = {}
    for r in sorted(rollouts, key=lambda r: r.index):
        for agent in r.agents.values():
            mask, ids, i = agent.gen_mask, agent.ids, 0
            while i < len(mask):
                if not mask[i]:
                    i += 1
                    continue
                j = i
                while j < len(mask) and mask[j]:
                    j += 1
                span = tuple(ids[max(0, i - MAX_CONTEXT):j])
                counts[span] = counts.get(span, 0) + 1
                i = j
    return [(list(span), n) for span, n in counts.items()]


def corpus_tensors(corpus: list[tuple[list[int], int]]) -> dict[str, torch.Tensor]:
    """A corpus as a checkpoint group: tokens (concatenated), lengths and counts, int64."""
    return {"tokens": torch.tensor([t for seq, _ in corpus for t in seq], dtype=torch.long),
            "lengths": torch.tensor([len(seq) for seq, _ in corpus], dtype=torch.long),
            "counts": torch.tensor([n for _, n in corpus], dtype=torch.long)}


def corpus_from_tensors(group: dict[str, torch.Tensor]) -> list[tuple[list[int], int]]:
    tokens, out, at = group["tokens"].tolist(), [], 0
    for length, n in zip(group["lengths"].tolist(), group["counts"].tolist()):
        out.append((tokens[at:at + length], n))
        at += length
    return out


def row_context(prompt: list[int], toks: list[int], n: int = MAX_CONTEXT) -> list[int]:
    """The last n tokens of prompt + toks, without joining the whole prompt."""
    if len(toks) >= n:
        return toks[-n:]
    return prompt[len(prompt) - (n - len(toks)):] + toks if len(prompt) > n - len(toks) else prompt + toks


def verify_inputs(last: torch.Tensor, drafts: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """last [A] (each row's newest token) and its drafts -> (ids [A, Q], fed [A, Q] long), Q = 1 +
    the longest draft: a row's last token then its drafts, padded with pad_id; fed marks the
    columns a row really feeds (its attention mask's new columns)."""
    q = 1 + max(len(d) for d in drafts)
    ids = torch.full((len(drafts), q), pad_id, dtype=torch.long)  # [A, Q]
    fed = torch.zeros((len(drafts), q), dtype=torch.long)  # [A, Q]
    ids[:, 0] = last
    for r, d in enumerate(drafts):
        if d:
            ids[r, 1:1 + len(d)] = torch.tensor(d, dtype=torch.long)
        fed[r, :1 + len(d)] = 1
    return ids, fed


def block_mask(attn: torch.Tensor, q: int) -> torch.Tensor:
    """attn [A, W] (1 = a real column; its last q columns the new ones) -> [A, 1, Q, W] bool: each
    new column sees the real columns up to itself (padding hidden, causal within the block)."""
    w = attn.shape[1]
    causal = torch.ones((q, w), dtype=torch.bool, device=attn.device).tril(w - q)  # [Q, W]
    return (attn.bool()[:, None, :] & causal[None])[:, None]  # [A, 1, Q, W]


def hide_rejected(attn: torch.Tensor, q: int, drafts: list[list[int]], emitted: list[int]) -> torch.Tensor:
    """After a call over the last q columns of attn [A, W]: a row that emitted e tokens keeps its
    first e fed columns (its last token and the e - 1 drafts it drew); the columns of its other
    drafts become holes. Rows that fed one column (no drafts) are unchanged."""
    attn = attn.clone()
    w = attn.shape[1]
    for r, (d, e) in enumerate(zip(drafts, emitted)):
        if e < 1 + len(d):
            attn[r, w - q + e:w - q + 1 + len(d)] = 0
    return attn


def emit(logits: torch.Tensor, drafts: list[list[int]], rows: list, shared: torch.Generator, temperature: float,
         greedy: bool, end_id: int, max_new_tokens: int) -> list[int]:
    """Draw each row's tokens from logits [A, Q, V] (position j: the logits after the row's j-th fed
    column), appending them to `row.toks` / `row.lps`; returns how many each row emitted.

    Position by position: every row draws at j = 0; a row goes on to j + 1 only while the token it
    drew at j is its j-th draft (and is not the end token, nor the turn's cap). Rows with a
    generator draw from it, one draw per emitted token, as a call per token would; the others
    share `shared`."""
    emitted = [0] * len(rows)
    live = list(range(len(rows)))
    for j in range(logits.shape[1]):
        sub = [rows[r] for r in live]
        gens = shared if any(row.generator is None for row in sub) else [row.generator for row in sub]
        at = logits[:, j] if len(live) == len(rows) else logits[torch.tensor(live), j]  # [a, V]
        tok, lp = sample_tokens(at, temperature, greedy, gens)  # [a], [a]
        nxt = []
        for r, row, k, v in zip(live, sub, tok.tolist(), lp.tolist()):
            row.toks.append(k)
            row.lps.append(v)
            emitted[r] += 1
            if j < len(drafts[r]) and drafts[r][j] == k and k != end_id and len(row.toks) < max_new_tokens:
                nxt.append(r)
        if not nxt:
            break
        live = nxt
    return emitted
