"""Batched sampling that returns token ids and behaviour log-probs.

Two ways in: `HFSampler.generate` takes a whole wave of prompts and returns when all are done;
`HFSampler.stream()` is continuous batching: prompts join the running batch between decode
steps and finished turns leave it at once, so a rollout whose turns are done can hand in its
next turns while the other rollouts are still decoding (collective/runtime.py).

Why not `model.generate`: agent turns have very different lengths (a one-token `<wait/>`
next to a 60-token hiring turn), and `generate` keeps computing every row until the
longest one ends. The loop below drops a row from the batch (and from the KV cache) as
soon as it emits the end-of-turn token, so the cost of a wave follows
the tokens actually generated (measured: benchmarks/rollout_throughput.py). The returned
log-probs are those of the distribution actually sampled from (temperature applied),
which the PPO ratio needs as its denominator.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from contextlib import nullcontext
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache

from swarmrl.policy.decode_state import DecodeSettings, Row
from swarmrl.policy.fast_decode import FastDecode
from swarmrl.policy.kvcache import (attention_layout, cache_keyword, crop_left, decode_mask, prefill_parts,
                                    prepared_decode_masks, row_columns, stack_left_padded)
from swarmrl.policy.lora_batch import AdapterBatch
from swarmrl.policy.model import Policy
from swarmrl.policy.prompt_pool import Past, PromptPool
from swarmrl.policy.speculative import NgramDrafter, block_mask, emit, hide_rejected, row_context, verify_inputs


@dataclass
class Sample:
    ids: list[int]  # generated tokens, including the end token when the turn ended normally
    logprobs: list[float] = field(default_factory=list)  # behaviour log-prob of each id
    hit_cap: bool = False  # True when the turn was cut at max_new_tokens


class HFSampler:
    def __init__(self, policy: Policy, temperature: float = 1.0, max_batch_sequences: int = 256,
                 prefill_overhead_tokens: int = 300, batched_adapters: bool = True):
        if temperature <= 0:
            raise ValueError(f"sampler temperature must be > 0 (got {temperature}); use greedy=True instead")
        attention_layout(policy.model)  # refuse an architecture the decode loop is not exact for, now
        self.policy = policy
        self.temperature = temperature
        self.max_batch_sequences = max_batch_sequences
        # The fixed cost of one forward call in prompt tokens (tiny model, 2 CPU cores: ~10 ms
        # for one row vs ~28k prefill tokens/s). 0 would put every length in its own bucket.
        self.prefill_overhead_tokens = prefill_overhead_tokens
        self.batched_adapters = batched_adapters  # sampler.batched_adapters

    def stream(self, max_new_tokens: int, seed: int = 0, greedy: bool = False, admit_fraction: float = 0.5,
               kv_cache_mb: float = 0.0, share_prompts: bool = True, draft_tokens: int = 0,
               draft_corpus: list | None = None) -> "DecodeStream":
        """`kv_cache_mb`: cap on the saved prefixes (DecodeStream), 0 = no cap. `share_prompts`:
        prompts that start like one prefilled before run only their remainder (prompt_pool.py).
        `draft_tokens`: guessed tokens a decode call may verify per row, from a table that starts
        from `draft_corpus` (policy/speculative.py `draft_corpus`) and learns the stream's turns."""
        settings = DecodeSettings(max_new_tokens=max_new_tokens, temperature=self.temperature, greedy=greedy,
                                  end_id=self.policy.end_id, pad_id=self.policy.pad_id,
                                  max_batch_sequences=self.max_batch_sequences,
                                  prefill_overhead_tokens=self.prefill_overhead_tokens, admit_fraction=admit_fraction,
                                  batched_adapters=self.batched_adapters, draft_tokens=draft_tokens)
        drafter = NgramDrafter.from_corpus(draft_corpus or []) if draft_tokens else None
        return DecodeStream(self.policy.model, settings, seed, kv_cache_mb, share_prompts, drafter)

    @torch.no_grad()
    def generate(self, prompts: list[list[int]], max_new_tokens: int, seed: int,
                 greedy: bool = False, adapters: list[str] | None = None,
                 row_seeds: list[int] | None = None) -> list[Sample]:
        """`adapters`: the LoRA adapter of each prompt (isolated policies: one batch, mixed adapters).
        `row_seeds`: one sampling seed per prompt (batch-independent sampling; `seed` is then
        unused). Prompts beyond `max_batch_sequences` join as rows finish."""
        stream = self.stream(max_new_tokens, seed, greedy, admit_fraction=0.0)
        for i in sorted(range(len(prompts)), key=lambda i: len(prompts[i])):  # similar lengths batch together
            stream.add(i, prompts[i], adapters[i] if adapters is not None else None,
                       row_seeds[i] if row_seeds is not None else None)
        out: list[Sample | None] = [None] * len(prompts)
        while stream.busy():
            for i, sample in stream.step():
                out[i] = sample
        return out  # type: ignore[return-value]


class DecodeStream:
    """Continuous batching over one KV cache: `add` queues a prompt, `step` admits queued prompts
    (bucketed prefill, stacked into the running cache), samples one token for every row, and
    returns the rows that finished. Each row is sampled with its own generator when it has a
    row seed, so its tokens do not depend on which rows share its batch.

    Admission: queued prompts join when the batch is empty or when they number at least
    `admit_fraction` x the running rows; each admission is one prefill call per length bucket,
    so admitting every few rows would spend the time saved on call overhead.

    Saved prefixes (`add(..., key=agent)`): a finished turn's keys/values wait for the agent's
    next prompt. Shared prompts (`share_prompts`, prompt_pool.py): the keys/values of prompts
    prefilled here wait for prompts that start the same way; a prompt that shares its first
    MIN_SHARED tokens with an earlier one of the same admission waits one prefill call for it.
    Both are held in at most `kv_cache_mb` MiB together (0 = no cap; the running batch's own
    cache is not counted): `finished(key)` drops an agent's prefix at once (it will never be
    read again); over the cap pooled prompts go first, then the least recently saved prefixes.
    A dropped prefix only costs compute: the prompt is prefilled in full, and its sampled
    tokens do not change beyond float rounding (each row draws from its own generator).
    """

    def __init__(self, model: torch.nn.Module, settings: DecodeSettings, seed: int, kv_cache_mb: float = 0.0,
                 share_prompts: bool = True, drafter: NgramDrafter | None = None):
        self.model, self.settings = model, settings
        # 'full' or 'sliding' (sliding-window layers: a saved prefix is continued one row per
        # prefill, see kvcache.attention_layout); refuses layers that are not attention.
        self.layout = attention_layout(model)
        self.prepared_masks = prepared_decode_masks(model)  # decode steps skip transformers' mask building
        self.lora = AdapterBatch.for_model(model) if settings.batched_adapters else None  # PEFT models only
        # Decode steps skip transformers' module machinery too, where that is bitwise the same; under
        # PEFT on the transformers model inside, whose LoRA layers `lora.rows` batches.
        hf = model.get_base_model() if self.lora is not None else model
        self.fast = FastDecode.for_model(hf) if self.prepared_masks else None
        self.device = model.device
        self.gen = torch.Generator(device=self.device).manual_seed(seed)  # rows without a row seed
        self.cache_kw = cache_keyword(model)
        self.live: dict[object, Row] = {}  # tag -> every request added and not yet finished
        self.queue: list[Row] = []  # waiting to join the batch
        self.rows: list[Row] = []  # the batch, in batch order
        self.cache = self.attn = self.next_pos = self.logits = None  # [A, W] mask, [A] positions, [A, Q, V]
        self.drafts: list[list[int]] = []  # per row: the guesses its last call fed after its last token
        # Drafts leave holes in a row's columns: exact under full attention only (speculative.py)
        self.drafter = (drafter or NgramDrafter()) if settings.draft_tokens > 0 and self.layout == "full" else None
        self.stackable = True  # False for sliding-window/static caches: then prompts join an empty batch only
        # key -> (tokens, [(k, v)] per layer), least recently saved first
        self.prefix: OrderedDict[object, tuple[list[int], list]] = OrderedDict()
        self.prefix_bytes: dict[object, int] = {}
        # prompts other rows may extend; per-column layouts only (see kvcache.attention_layout)
        self.pool = PromptPool() if share_prompts and self.layout == "full" else None
        self.cached_bytes = 0  # bytes of saved per-agent prefixes
        self.peak_cached_bytes = 0  # most bytes held at once, saved prefixes and pooled prompts
        self.cap_bytes = math.ceil(kv_cache_mb * 2**20)  # 0 = no cap; any positive cap is >= 1 byte
        self.ended: set = set()  # keys of agents that take no further turn
        self.evicted = 0  # prefixes dropped by the cap (for diagnostics and tests)
        self.drafted = self.accepted = 0  # draft tokens fed, and kept (diagnostics, benchmarks/draft_tokens.py)

    def add(self, tag, prompt: list[int], adapter: str | None = None, row_seed: int | None = None,
            key=None) -> None:
        """`key`: who the prompt belongs to (an agent); its next prompt reuses this one's KV cache."""
        if tag in self.live:
            raise ValueError(f"tag {tag!r} is already in the stream")
        gen = None if row_seed is None else torch.Generator(device=self.device).manual_seed(row_seed)
        row = Row(tag, prompt, key, adapter, gen)
        self.live[tag] = row
        self.queue.append(row)

    def busy(self) -> bool:
        return bool(self.queue or self.rows)

    def finished(self, key) -> None:
        """The agent `key` takes no further turn: drop its saved prefix now, and save none for
        a turn of it still in flight."""
        self.ended.add(key)
        self._drop_prefix(key)

    def _drop_prefix(self, key) -> tuple[list[int], list] | None:
        saved = self.prefix.pop(key, None)
        self.cached_bytes -= self.prefix_bytes.pop(key, 0)
        return saved

    def _forward(self, rows: list[Row], fast: bool = False, keep: int = 1, **inputs) -> torch.Tensor:
        """The model's logits at the last `keep` columns [b, keep, V] for `rows`, each through its
        own adapter if any; `fast`: through FastDecode (inputs: input_ids, attention_mask, position_ids)."""
        adapters = [r.adapter for r in rows] if rows[0].adapter is not None else None
        if adapters is not None and self.lora is None:  # PEFT's own loop over the adapters
            inputs["adapter_names"] = adapters
        with self.lora.rows(adapters) if adapters is not None and self.lora is not None else nullcontext():
            if fast:
                return self.fast(inputs["input_ids"], inputs["attention_mask"], inputs["position_ids"], self.cache)
            return self.model(**inputs, use_cache=True, logits_to_keep=keep).logits[:, -keep:]

    # inference_mode, not no_grad: nothing sampled here is ever differentiated (the learner
    # recomputes log-probs from token ids), so autograd's view/version tracking is pure cost.
    @torch.inference_mode()
    def step(self) -> list[tuple[object, Sample]]:
        # Toggle only when needed: `.eval()` walks every submodule on every call (the learner
        # leaves models in eval mode, so during rollouts this is a no-op check).
        if not self.model.training:
            return self._step()
        self.model.eval()
        try:
            return self._step()
        finally:
            self.model.train()

    def _step(self) -> list[tuple[object, Sample]]:
        st = self.settings
        room = st.max_batch_sequences - len(self.rows)
        if self.queue and room > 0 and (not self.rows or (self.stackable and
                                                           len(self.queue) >= st.admit_fraction * len(self.rows))):
            self._admit(self.queue[:room])
            self.queue = self.queue[room:]
        if not self.rows:
            return []
        emitted = emit(self.logits, self.drafts, self.rows, self.gen, st.temperature, st.greedy, st.end_id,
                       st.max_new_tokens)  # per row: tokens drawn this step (1 + the drafts it kept)
        if self.logits.shape[1] > 1:  # a call over drafts: rejected columns become holes
            self.accepted += sum(emitted) - len(emitted)
            self.attn = hide_rejected(self.attn, self.logits.shape[1], self.drafts, emitted)
            self.next_pos = self.next_pos + torch.tensor(emitted, device=self.device) - 1
        keep, done = [], []
        for j, row in enumerate(self.rows):
            stopped = row.toks[-1] == st.end_id
            if stopped or len(row.toks) >= st.max_new_tokens:
                self._save_prefix(j, row)
                if self.drafter is not None:
                    self.drafter.observe(row_context(row.prompt, []) + row.toks)
                del self.live[row.tag]
                done.append((row.tag, Sample(row.toks, row.lps, hit_cap=not stopped)))
            else:
                keep.append(j)
        if len(keep) < len(self.rows):  # drop finished rows from the batch and the KV cache
            self._select(keep)
        if self.rows:
            self._decode()
        return done

    def _decode(self) -> None:
        """One call: each row's newest token, then its drafts (if drafting), at its next positions."""
        last = torch.tensor([row.toks[-1] for row in self.rows], device=self.device)  # [A]
        k = self.settings.draft_tokens if self.drafter is not None and self.stackable else 0
        self.drafts = [self.drafter.draft(row_context(row.prompt, row.toks), k) if k else [] for row in self.rows]
        ids, fed = verify_inputs(last, self.drafts, self.settings.pad_id)  # [A, Q] each
        self.drafted += sum(len(d) for d in self.drafts)
        q = ids.shape[1]
        self.attn = torch.cat([self.attn, fed.to(self.device)], dim=1)  # [A, W+Q]
        if q == 1:
            mask = decode_mask(self.attn) if self.prepared_masks else self.attn
        else:
            mask = block_mask(self.attn, q) if self.prepared_masks else self.attn
        pos = self.next_pos.unsqueeze(-1) + torch.arange(q, device=self.device)  # [A, Q]
        self.logits = self._forward(self.rows, self.fast is not None, keep=q, input_ids=ids.to(self.device),
                                    attention_mask=mask, position_ids=pos, **{self.cache_kw: self.cache})  # [A, Q, V]
        self.next_pos = self.next_pos + 1

    def _select(self, keep: list[int]) -> None:
        self.rows = [self.rows[j] for j in keep]
        self.drafts = [self.drafts[j] for j in keep]
        if not keep:
            self.cache = self.attn = self.next_pos = self.logits = None
            return
        sel = torch.tensor(keep, device=self.device)
        self.attn, self.next_pos, self.logits = self.attn[sel], self.next_pos[sel], self.logits[sel]
        self.cache.batch_select_indices(sel)
        # Columns that are padding for every remaining row (a long prompt just left) cost
        # attention compute at every later step: cut them.
        lead = int(self.attn.any(dim=0).long().argmax())
        if lead > 0 and crop_left(self.cache, lead):
            self.attn = self.attn[:, lead:]

    def _parts(self, batch: list[Row], bucketed: bool):
        """`batch` as prefill parts of (row, new tokens, Past or None), yielded one at a time so
        that the pool holds each part's prompts before the next is planned. First wave: every
        row but those that share their first MIN_SHARED tokens with an earlier row of this
        batch; second wave: those, which now extend that row's pooled prompt."""
        first, wait, leaders = [], [], set()
        for row in batch:
            past = self._past(row)
            lead = PromptPool.lead(row.adapter, row.prompt) if past is None and self.pool is not None else None
            if lead is not None and lead in leaders:
                wait.append(row)
                continue
            leaders.add(lead)
            first.append((row, past))
        sliding, overhead = self.layout == "sliding", self.settings.prefill_overhead_tokens
        yield from prefill_parts(first, overhead if bucketed else None, sliding)
        if wait:
            yield from prefill_parts([(row, self._past(row)) for row in wait], overhead if bucketed else None, sliding)

    def _past(self, row: Row) -> Past | None:
        """What the row's prompt may extend: its agent's saved turn (taken out of the store), else
        the longest pooled prompt it starts with."""
        if not self.stackable:
            return None
        saved = self._drop_prefix(row.key)
        if saved is not None and len(saved[0]) < len(row.prompt) and row.prompt[:len(saved[0])] == saved[0]:
            return Past(*saved, pooled=False)
        hit = self.pool.longest(row.adapter, row.prompt) if self.pool is not None else None
        return None if hit is None else Past(*hit, pooled=True)

    def _admit(self, batch: list[Row], bucketed: bool = True) -> None:
        """Prefill `batch` in length buckets and stack it under the running rows (left padding).

        A prompt that extends a saved prefix (the same agent's previous turn) only runs its new
        tokens, on top of the saved keys/values: the observation since its last turn, not the
        whole conversation again. Layout of such a row: [pad | past | pad | new], the holes
        masked out, so every row's last token sits in the last column."""
        caches, logits, masks, rows, next_pos = [], [], [], [], []
        for part in self._parts(batch, bucketed):
            cache, logit, mask, pos = self._prefill_part(part)
            self._pool_prompts(part, cache, mask)
            caches.append(cache)
            logits.append(logit.unsqueeze(1))  # [b, 1, V]
            masks.append(mask)
            next_pos.append(pos)
            rows += [row for row, _, _ in part]
        if self.rows:
            caches.insert(0, self.cache)
            logits.insert(0, self.logits)  # [A, Q, V]: the new rows' logits are padded to Q (never read)
            masks.insert(0, self.attn)
            next_pos.insert(0, self.next_pos)
        stacked = stack_left_padded(caches, self.settings.max_new_tokens)
        if stacked is None:  # sliding-window or static layers cannot be stacked: one padded bucket
            self.stackable, self.pool = False, None
            if len(caches) > 1:
                return self._admit(batch, bucketed=False)
        width = max(m.shape[1] for m in masks)
        self.cache = stacked or caches[0]
        self.attn = torch.cat([torch.nn.functional.pad(m, (width - m.shape[1], 0)) for m in masks])  # [A, W]
        self.next_pos = torch.cat(next_pos)  # [A]
        q = max(x.shape[1] for x in logits)
        self.logits = torch.cat([torch.nn.functional.pad(x, (0, 0, 0, q - x.shape[1])) for x in logits])  # [A, Q, V]
        self.drafts = (self.drafts if self.rows else []) + [[] for _ in rows]
        self.rows = self.rows + rows

    def _prefill_part(self, part: list) -> tuple[DynamicCache, torch.Tensor, torch.Tensor, torch.Tensor]:
        """One forward over rows (row, new tokens, saved prefix or None); the saved prefixes of a
        part are all present or all absent. Returns (cache, last logits [b, V], mask [b, Wp+N],
        next positions [b])."""
        pad_id, b = self.settings.pad_id, len(part)
        n = max(len(x) for _, x, _ in part)
        past = [0 if saved is None else len(saved[0]) for _, _, saved in part]
        wp = max(past)
        ids = torch.full((b, n), pad_id, dtype=torch.long)  # [b, N] new tokens, left padded
        mask = torch.zeros((b, wp + n), dtype=torch.long)  # [b, Wp + N]
        pos = torch.zeros((b, n), dtype=torch.long)  # [b, N]
        for r, (_, x, _) in enumerate(part):
            ids[r, n - len(x):] = torch.tensor(x, dtype=torch.long)
            mask[r, wp - past[r]:wp] = 1
            mask[r, wp + n - len(x):] = 1
            pos[r, n - len(x):] = torch.arange(past[r], past[r] + len(x))
        cache = DynamicCache()
        if wp:  # the saved keys/values [heads, past, head_dim] per layer, left padded to Wp
            lpad = lambda t, w: torch.nn.functional.pad(t, (0, 0, wp - w, 0))  # noqa: E731
            layers = zip(*[saved[1] for _, _, saved in part])  # per layer: b rows of (k, v)
            cache = DynamicCache(ddp_cache_data=[(torch.stack([lpad(k, w) for (k, _), w in zip(kv, past)]),
                                                  torch.stack([lpad(v, w) for (_, v), w in zip(kv, past)]))
                                                 for kv in layers])
        ids, mask, pos = ids.to(self.device), mask.to(self.device), pos.to(self.device)
        logits = self._forward([row for row, _, _ in part], input_ids=ids, attention_mask=mask, position_ids=pos,
                               **{self.cache_kw: cache})[:, -1]
        return cache, logits, mask, pos[:, -1] + 1

    def _save_prefix(self, j: int, row: Row) -> None:
        """Keep a finished row's keys/values (padding removed) for its agent's next turn. They
        cover the prompt and every generated token but the last, which was never fed back."""
        key = row.key
        if key is None or not self.stackable or key in self.ended:
            return
        cols = self.attn[j].nonzero().squeeze(-1)  # [len] the row's real columns
        kv = row_columns(self.cache, j, cols)
        self._drop_prefix(key)
        self.prefix[key] = (row.prompt + row.toks[:-1], kv)
        self.prefix_bytes[key] = sum(k.nbytes + v.nbytes for k, v in kv)
        self.cached_bytes += self.prefix_bytes[key]
        self._fit_cap()

    def _pool_prompts(self, part: list, cache: DynamicCache, mask: torch.Tensor) -> None:
        """Pool the prompts of a prefilled part that other rows may start with: those prefilled
        in full or on a pooled prompt (an agent's own later turns are its alone)."""
        if self.pool is None:
            return
        for r, (row, _, past) in enumerate(part):
            if (past is None or past.pooled) and not self.pool.covers(row.adapter, row.prompt):
                cols = mask[r].nonzero().squeeze(-1)  # [len(prompt)] the row's real columns
                self.pool.add(row.adapter, row.prompt, row_columns(cache, r, cols))
        self._fit_cap()

    def _fit_cap(self) -> None:
        """Over `kv_cache_mb`: pooled prompts go first (least recently used), then saved
        prefixes (least recently saved)."""
        pooled = lambda: self.pool.bytes if self.pool is not None else 0  # noqa: E731
        while self.cap_bytes and self.cached_bytes + pooled() > self.cap_bytes:
            if self.pool is not None and self.pool.evict():
                continue
            if not self.prefix:
                break
            self._drop_prefix(next(iter(self.prefix)))
            self.evicted += 1
        self.peak_cached_bytes = max(self.peak_cached_bytes, self.cached_bytes + pooled())
