"""One policy update over a step's sequences, for any policy sharing mode.

Why its own module: with per-role adapters the update is "for each slot (a shared model,
or one adapter / model copy per role type): forward, loss, backward; then clip and step
that slot's optimizer", plus per-role diagnostics — bookkeeping that would bury the
trainer's one readable step.

Gradient mass: each sequence's tokens carry weight w_s from rl/aggregation.py, computed over
the whole minibatch (all roles), so accumulating micro-batches and slots gives exactly the
chosen aggregation (token mean, sequence mean, or role-balanced), optionally divided by
the role's multiplicity.

Per-role gradient norm: under `isolated` it is the norm of the role's adapter gradient,
every step. Under `shared` the roles' gradients sum into one tensor, so on diagnostic steps
(role_grad_interval) the first minibatch is backpropagated role by role and the roles'
gradients are added: no extra pass, one more gradient-sized buffer.

Sharded learner (learner.strategy ddp | fsdp, `sharding`): the weights are still computed over
the whole minibatch on every rank; only the backward is split (distributed/sharding.py), and
the ranks' loss and per-role sums are added before the metrics, so they match one process.
"""

from __future__ import annotations

import numpy as np
import torch

from swarmrl.config import RLConfig
from swarmrl.diagnostics.roles import finalize_role_stats, grad_norm, merge_sums, role_token_sums
from swarmrl.policy.device import autocast, model_device
from swarmrl.policy.sharing import PolicySet, SharedPolicies
from swarmrl.rl.aggregation import sequence_weights, token_weights
from swarmrl.rl.batch import TrainSeq, micro_batches, pad, token_logprobs
from swarmrl.rl.prefix import SharedPrefixes, can_share, prefix_lengths, shared_logprobs
from swarmrl.seeds import rng_for


class Updater:
    # model.mixed_precision: autocast of the forward passes (policy/device.py); build.py sets it.
    mixed_precision: str = "no"

    def __init__(self, cfg: RLConfig, policies: PolicySet, loss_fn, pad_id: int, seed: int, *,
                 temperature: float = 1.0, sharding=None):
        """`temperature`: the sampler's (cfg.sampler.temperature). Log-probs of the policy and of
        the reference, and the entropy, are those of softmax(logits / temperature), the
        distribution the behaviour log-probs come from. `sharding`: a sharded learner
        (distributed/sharding.py `ShardedLearner`, learner.strategy ddp | fsdp) whose ranks each
        backpropagate a share of every minibatch; None: this process trains alone."""
        self.cfg = cfg
        self.policies = policies
        self.loss_fn = loss_fn
        self.pad_id = pad_id
        self.seed = seed
        self.temperature = temperature
        self.sharding = sharding
        self.optimizers = {slot: torch.optim.AdamW(policies.parameters(slot), lr=cfg.lr, weight_decay=cfg.weight_decay)
                           for slot in policies.slots}

    def weights(self, seqs: list[TrainSeq]) -> torch.Tensor:
        """Per-token weight of each sequence of a minibatch.  -> [S]"""
        counts = torch.tensor([sum(s.gen_mask) for s in seqs])  # [S]
        names = sorted({s.role for s in seqs})
        roles = torch.tensor([names.index(s.role) for s in seqs])  # [S]
        mult = torch.tensor([s.multiplicity for s in seqs]) if self.cfg.multiplicity_normalized else None  # [S]
        return sequence_weights(counts, roles, self.cfg.aggregation, mult)

    def backward(self, seqs: list[TrainSeq], w: torch.Tensor, stats: dict | None = None) -> dict[str, float]:
        """Accumulate the gradient of the loss of `seqs` (weights w [S]) into every slot.

        Returns {"loss": the summed (weighted) loss, "tokens": tokens with weight > 0, and for
        each loss metric its token-count-weighted sum}: `pool_metrics` turns sums into means.
        Tensors are made on each slot's model device; the forwards run under `mixed_precision`."""
        sums: dict[str, float] = dict.fromkeys(_COUNTS, 0.0)
        wmap = {id(s): float(x) for s, x in zip(seqs, w)}
        # A loss that never clips must not show clipped tokens per role either.
        role_eps = self.cfg.clip_eps if getattr(self.loss_fn, "clips", True) else None
        for slot in self.policies.slots:
            mine = [s for s in seqs if self.policies.slot(s.role) == slot]
            if not mine:
                continue
            with self.policies.model_for(slot) as model:
                device = model_device(model)
                sums["seq_tokens"] += float(sum(len(s.ids) for s in mine))
                cut = self._shares(mine, model)  # None: whole sequences
                cut_of = {id(s): c for s, c in zip(mine, cut or [])}
                prefixes = ref_prefixes = None
                if cut is not None:
                    prefixes = self._prefixes(model, mine, cut)
                    sums["pad_cells"] += prefixes.cells["cells"]
                    sums["pad_real"] += prefixes.cells["real"]
                    if self.cfg.kl_coef > 0:
                        with torch.no_grad(), self.policies.reference(slot) as ref_model:
                            ref_prefixes = self._prefixes(ref_model, mine, cut)
                lengths = [len(s.ids) - c for s, c in zip(mine, cut)] if cut is not None else None
                for micro in micro_batches(mine, self.cfg.micro_batch_tokens, sort=self.cfg.length_buckets,
                                           max_pad=self.cfg.max_pad_fraction if self.cfg.length_buckets else 1.0,
                                           lengths=lengths):
                    mcut = [cut_of[id(s)] for s in micro] if cut is not None else None
                    t = pad(micro, self.pad_id, device)
                    logp, ent, cells = self._logprobs(model, micro, mcut, prefixes, t, stats is not None)  # [B, T]
                    sums["pad_cells"] += cells["cells"]  # learner/pad_fraction: computed cells vs tokens
                    sums["pad_real"] += cells["real"]
                    weights = token_weights(t["mask"], torch.tensor([wmap[id(s)] for s in micro], device=device))  # [B, T]
                    loss, m = self.loss_fn(logp, t["old_logp"], t["adv"], weights, clip_eps=self.cfg.clip_eps)
                    if self.cfg.kl_coef > 0:
                        with torch.no_grad(), self.policies.reference(slot) as ref_model:
                            ref, _, _ = self._logprobs(ref_model, micro, mcut, ref_prefixes, t, False)
                        kl = torch.exp(ref - logp) - (ref - logp) - 1.0  # [B, T] k3, always >= 0
                        scale = torch.tensor([s.kl_scale for s in micro], device=device).unsqueeze(-1)  # [B, 1]
                        loss = loss + self.cfg.kl_coef * (kl * weights * scale).sum()
                    loss.backward()
                    n = float((weights > 0).sum())  # the tokens the loss metrics are means over
                    sums["loss"] += float(loss.detach())
                    sums["tokens"] += n
                    for k, v in m.items():
                        sums[k] = sums.get(k, 0.0) + n * float(v)
                    if stats is not None:
                        stats.update(merge_sums(stats, role_token_sums(
                            logp.detach(), t["old_logp"], ent, t["mask"], [s.role for s in micro], role_eps,
                            adv=t["adv"], clip_eps_high=self.cfg.clip_eps_high, dual_clip=self.cfg.dual_clip)))
                if prefixes is not None:
                    prefixes.backward()  # the micro-batches' gradient on the prefixes' keys/values
        return sums

    def _shares(self, seqs: list[TrainSeq], model) -> list[int] | None:
        """Each sequence's shared prefix length (rl/prefix.py), or None: no sharing here. Not
        under fsdp: its root module gathers the embedding only in the whole model's forward,
        and the prefixes run the decoder body alone."""
        fsdp = self.sharding is not None and self.sharding.strategy == "fsdp"
        if fsdp or not (self.cfg.share_prefixes and can_share(model)):
            return None
        cut = prefix_lengths(seqs)
        return cut if any(cut) else None

    def _logprobs(self, model, micro: list[TrainSeq], cut: list[int] | None, prefixes, t: dict, with_entropy: bool):
        """(log-probs [B, T], entropy [B, T] or None, {"cells", "real"}) of the padded micro-batch
        `t` under `model`; where `cut` names shared prefixes, their keys/values from `prefixes`."""
        device = model_device(model)
        with autocast(device, self.mixed_precision):
            if cut is not None and any(cut):
                return shared_logprobs(model, micro, cut, prefixes, self.pad_id, device, with_entropy,
                                       temperature=self.temperature, chunk_tokens=self.cfg.logprob_chunk_tokens,
                                       keep=t["mask"])
            logp, ent = token_logprobs(model, t["ids"], t["attn"], with_entropy=with_entropy, temperature=self.temperature,
                                       chunk_tokens=self.cfg.logprob_chunk_tokens, keep=t["mask"])
        return logp, ent, {"cells": float(t["ids"].numel()), "real": float(sum(len(s.ids) for s in micro))}

    def _prefixes(self, model, seqs: list[TrainSeq], cut: list[int]) -> SharedPrefixes:
        device = model_device(model)
        with autocast(device, self.mixed_precision):
            return SharedPrefixes(model, seqs, cut, self.pad_id, device, self.cfg.micro_batch_tokens)

    def update(self, seqs: list[TrainSeq], step: int, measure_roles: bool) -> dict[str, float]:
        """`minibatches_per_step` optimizer updates over the step's sequences.

        `loss` is the mean over minibatches of each minibatch's objective (the weighted sum that
        was differentiated, so its scale follows the aggregation). `ratio_mean`, `clip_frac` and
        `approx_kl` are plain token means over every generated token of the step (all
        micro-batches, slots and minibatches), whatever the aggregation."""
        for model in self.policies.modules():
            model.train()
        if self.sharding is not None:
            self.sharding.begin_update()
        order = rng_for("minibatch_order", self.seed, step).permutation(len(seqs))
        out: dict[str, float] = {}
        totals: dict[str, float] = {}
        stats: dict = {}
        role_norms: dict[str, list[float]] = {}
        parts = [p for p in np.array_split(order, self.cfg.minibatches_per_step) if len(p)]
        for k, part in enumerate(parts):
            mb = [seqs[i] for i in part]
            w = self.weights(mb)  # [S_mb], over the whole minibatch (on every rank of a sharded learner)
            # Per-role statistics over every minibatch: on the first one the ratio is exactly 1
            # when the step samples on-policy, so that one alone would hide the drift.
            if measure_roles and k == 0 and isinstance(self.policies, SharedPolicies):
                sums = self._backward_by_role(mb, w, stats, role_norms)
            else:
                self._zero()
                sums = self._backward_share(mb, w, list(range(len(mb))), stats)
            for key, v in sums.items():
                totals[key] = totals.get(key, 0.0) + v
            self._clip_and_step(mb, len(parts), out, role_norms)
        self._zero()
        if self.sharding is not None:  # the ranks' sums: the whole step's metrics, the same on every rank
            totals, stats = self.sharding.sum_tree(totals), self.sharding.sum_tree(stats)
            out.update(self.sharding.busy_metrics("update"))  # how long the ranks waited for the slowest
            self.sharding.gather()  # fsdp: full weights again, for sampling
        for model in self.policies.modules():  # back to sampling mode once, not per decode step
            model.eval()
        out.update(pool_metrics(totals, len(parts)))
        out.update(finalize_role_stats(stats))
        tokens = sum(v["tokens"] for v in stats.values())
        out["entropy"] = sum(v["entropy"] for v in stats.values()) / max(tokens, 1.0)
        for role, norms in role_norms.items():
            out[f"role/{role}/grad_norm"] = float(np.mean(norms))
        out["adv_abs_mean"] = float(np.mean([abs(s.advantage) for s in seqs])) if seqs else 0.0
        return out

    def _backward_share(self, mb: list[TrainSeq], w: torch.Tensor, sel: list[int],
                        stats: dict | None = None) -> dict[str, float]:
        """The gradient of the minibatch's sequences `sel` (w [S_mb]: the whole minibatch's weights):
        all of it in one process; under a sharded learner this rank's share, summed over the ranks."""
        if self.sharding is None:
            return self.backward([mb[i] for i in sel], w[sel], stats)
        return self.sharding.backward(self, mb, w, sel, stats)

    def _backward_by_role(self, mb: list[TrainSeq], w: torch.Tensor, stats: dict,
                          role_norms: dict[str, list[float]]) -> dict[str, float]:
        """The shared model's minibatch gradient as the sum of one backward per role, each role's
        gradient norm appended to `role_norms` on the way, so the diagnostic costs no extra pass.
        Holds one more gradient-sized buffer. Equals one backward over the whole minibatch up to
        float rounding: the roles' gradients are added in a different order."""
        params = [p for g in self.optimizers["shared"].param_groups for p in g["params"]]
        acc: list[torch.Tensor | None] = [None] * len(params)
        sums: dict[str, float] = {}
        for role in sorted({s.role for s in mb}):
            self._zero()  # set_to_none: this role's backward writes fresh tensors; acc keeps the last ones
            for key, v in self._backward_share(mb, w, [i for i, s in enumerate(mb) if s.role == role], stats).items():
                sums[key] = sums.get(key, 0.0) + v
            role_norms.setdefault(role, []).append(
                grad_norm(params) if self.sharding is None else self.sharding.grad_norm(params))
            acc = [p.grad if a is None else (a if p.grad is None else a.add_(p.grad)) for a, p in zip(acc, params)]
        for a, p in zip(acc, params):
            p.grad = a
        return sums

    def _clip_and_step(self, mb: list[TrainSeq], minibatches: int, out: dict, role_norms: dict) -> None:
        """Clip each slot's gradient to rl.grad_clip (its global norm: over every rank's shard under
        fsdp) and step that slot's optimizer."""
        for slot, opt in self.optimizers.items():
            params = [p for g in opt.param_groups for p in g["params"]]  # fsdp: the sharded parameters
            norm = (float(torch.nn.utils.clip_grad_norm_(params, self.cfg.grad_clip)) if self.sharding is None
                    else self.sharding.clip(params, self.cfg.grad_clip))
            out["grad_norm"] = out.get("grad_norm", 0.0) + norm / minibatches
            mine = [s for s in mb if self.policies.slot(s.role) == slot]
            if not isinstance(self.policies, SharedPolicies) and mine:
                role_norms.setdefault(slot, []).append(norm)  # a role absent this step has no norm, not 0
            if self.cfg.multiplicity_lr_scaled and mine:
                for group in opt.param_groups:  # AdamW cancels a loss scale; a step size it cannot
                    group["lr"] = self.cfg.lr / max(s.multiplicity for s in mine)
            opt.step()

    def _zero(self) -> None:
        for opt in self.optimizers.values():
            opt.zero_grad(set_to_none=True)

    def state_dict(self) -> dict[str, dict]:
        return {slot: opt.state_dict() for slot, opt in self.optimizers.items()}


_COUNTS = ("loss", "tokens", "pad_cells", "pad_real", "seq_tokens")  # sums of `backward` that are not token-mean metrics


def pool_metrics(totals: dict[str, float], minibatches: int) -> dict[str, float]:
    """Step metrics from the sums of `Updater.backward` over all minibatches: the loss averaged
    over minibatches, every other metric divided by the token count (a plain token mean)."""
    if not totals:
        return {}
    n = max(totals["tokens"], 1.0)
    out = {k: v / n for k, v in totals.items() if k not in _COUNTS}
    out["loss"] = totals["loss"] / max(minibatches, 1)
    if totals.get("pad_cells"):  # share of the padded micro-batch cells that held no token
        out["learner/pad_fraction"] = 1.0 - totals["pad_real"] / totals["pad_cells"]
    if totals.get("seq_tokens"):  # below 1 where shared prompt prefixes ran once for many sequences
        out["learner/tokens_run_fraction"] = totals["pad_real"] / totals["seq_tokens"]
    return out
