"""The sharded learner (learner.strategy ddp | fsdp): one process per rank, launched by torchrun.

Every rank holds the whole step's sequences and computes the per-token weights over the whole
minibatch (rl/aggregation.py), then backpropagates only its share (rl/sharded.py
`token_share`). The minibatch loss is the sum of the ranks' partial losses, so its gradient is
the SUM of the ranks' gradients: never their mean, which would divide the gradient by the
world size.

- `ddp`: every rank holds the whole model. After its backward passes a rank all-reduces (SUM)
  the gradients of every trainable parameter, in one flat buffer, with one flag per parameter
  so that a parameter no rank touched keeps `grad=None` (AdamW skips it, as it would in one
  process). Why not `DistributedDataParallel`: DDP reduces inside every backward and so needs
  the same number of backward passes on every rank, and one fixed set of trainable parameters;
  here the ranks' micro-batch counts differ, LoRA adapters switch `requires_grad` slot by slot,
  and diagnostic steps add per-role passes. The traffic is the same (one all-reduce of the
  trainable gradients per optimizer step); only DDP's overlap with the last backward is lost.
- `fsdp`: FSDP2 (`fully_shard`) on every decoder layer and on the root. Each backward
  reduce-scatters into the sharded gradients; the reduction is a plain SUM
  (`set_gradient_divide_factor(1)`, and `set_force_sum_reduction_for_comms` because gloo has
  no AVG / PREMUL_SUM). FSDP's hooks are collectives, so every rank runs the same number of
  forward/backward passes per slot: a rank with fewer micro-batches runs the missing ones on a
  zero-weight sequence (a zero gradient). Between updates the parameters rest unsharded, so the
  sampler runs without collectives (each rank generates a different number of tokens); the
  update reshards them first and gathers them again at its end. Sampling needs the full
  weights on each rank anyway; during the update they are sharded.

Checkpoints hold the full, unsharded weights and optimizer state, gathered to rank 0 in the
single-process format (`full_state`), so a run resumes under any strategy and world size.
Why not per-rank shards (torch.distributed.checkpoint): those resume only at the same world
size and sharding. The cost: rank 0 holds one full CPU copy of the trainable weights plus two
AdamW moments (3x the trainable parameters in float32) while it writes.
"""

from __future__ import annotations

import time
from datetime import timedelta

import torch
import torch.distributed as dist

from swarmrl.rl.batch import micro_batches
from swarmrl.rl.prefix import prefix_clusters
from swarmrl.rl.sharded import cluster_share, rank_idle, sum_tree, token_share


def flat_grads(params: list[torch.nn.Parameter]) -> list[torch.Tensor]:
    """Each parameter's gradient as a flat [numel] tensor (a view where it has one), zeros where
    it has none: the pieces of one flat buffer to exchange."""
    return [p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel(), dtype=p.dtype, device=p.device)
            for p in params]


class ShardedLearner:
    """The process group of a sharded learner and what the update does with it; `close()`
    destroys the group (build.py `RunParts.close`)."""

    def __init__(self, strategy: str, backend: str, rank: int, world: int):
        self.strategy, self.rank, self.world = strategy, rank, world
        if not dist.is_initialized():  # torchrun's env:// rendezvous (MASTER_ADDR, RANK, WORLD_SIZE)
            dist.init_process_group(backend)
        self.backend = dist.get_backend()
        self.fsdp_modules: list[torch.nn.Module] = []
        self.gathered = False  # fsdp: the modules hold their full parameters (between updates)
        self.busy_s = 0.0  # this rank's own backward seconds since its last wait for the others
        self.busy_spans: list[float] = []  # busy_s at each wait since the last `busy_metrics`

    def close(self) -> None:
        """Destroy the process group once every rank got here; idempotent. Under gloo a rank
        whose peer tore down its connections first can abort (seen once in a full test run), so
        the ranks meet at a barrier first; one that never arrives (it crashed) fails the barrier
        after a minute, and the group is destroyed all the same."""
        if not dist.is_initialized():
            return
        try:
            self.barrier()
        finally:
            dist.destroy_process_group()

    def barrier(self) -> None:
        """Every rank waits here for the others (gloo: one that never arrives fails it after a
        minute, and it returns all the same: `close` destroys the group after it)."""
        try:
            if self.backend == "gloo":
                dist.monitored_barrier(timeout=timedelta(seconds=60))
        except RuntimeError:
            pass

    # ------------------------------------------------------------------ objects
    def all_gather(self, obj) -> list:
        """Every rank's `obj`, in rank order (pickled)."""
        out: list = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def gather_ordered(self, rows: list[torch.Tensor], owner: list[int], size: int) -> list[torch.Tensor]:
        """Every item of every rank, in item order: `owner[i]` is the rank holding item i (the same
        list on every rank), `rows` this rank's items in that order, each [size]. One all-gather,
        padded to the rank that holds the most items."""
        width = max(owner.count(r) for r in range(self.world))
        buf = torch.zeros(width, size, dtype=rows[0].dtype if rows else torch.float32)  # [width, size]
        for k, row in enumerate(rows):
            buf[k] = row
        got = [torch.empty_like(buf) for _ in range(self.world)]
        dist.all_gather(got, buf)
        taken = [0] * self.world
        items = []
        for r in owner:
            items.append(got[r][taken[r]])
            taken[r] += 1
        return items

    def sum_tree(self, tree: dict) -> dict:
        """Key-wise sum over ranks of a nested dict of floats (loss sums, per-role token sums)."""
        return sum_tree(self.all_gather(tree))

    def waits(self) -> None:
        """Mark that this rank is about to wait for the others (a collective that every rank calls
        as often): its busy seconds since the previous wait become one span (`rank_idle`)."""
        self.busy_spans.append(self.busy_s)
        self.busy_s = 0.0

    def busy_metrics(self, phase: str) -> dict[str, float]:
        """`rank_idle` of every rank's busy spans (a collective); they start again empty. Under
        fsdp the ranks also wait inside the backward's collectives, so the idle share reads low."""
        self.waits()  # the work since the last wait, if any: this gather is its wait
        spans, self.busy_spans = self.all_gather(self.busy_spans), []
        if len({len(s) for s in spans}) > 1:  # a rank marked waits the others did not: totals only
            spans = [[sum(s)] for s in spans]
        return rank_idle(phase, spans)

    # ------------------------------------------------------------------ wrapping
    def wrap(self, policies) -> None:
        """fsdp: shard every model of the policy set (decoder layers, then the root). Call it before
        the optimizers are built: they must hold the sharded parameters, which the modules show
        only while sharded (`gather` swaps the full ones in). ddp: nothing to wrap."""
        if self.strategy != "fsdp":
            return
        from torch.distributed.fsdp import FSDPModule, fully_shard
        for model in policies.modules():
            layer_classes = {c for m in model.modules() for c in getattr(m, "_no_split_modules", None) or ()}
            for m in list(model.modules()):
                if type(m).__name__ in layer_classes:
                    fully_shard(m)
            fully_shard(model)
            self.fsdp_modules += [m for m in model.modules() if isinstance(m, FSDPModule)]
        for m in self.fsdp_modules:
            m.set_gradient_divide_factor(1.0)
            m.set_force_sum_reduction_for_comms(True)

    def gather(self) -> None:
        """fsdp: all-gather the parameters and keep them (the state between updates), unless they
        are already. A collective: every rank calls it at the same point (its state is theirs)."""
        if self.gathered or not self.fsdp_modules:
            return
        for m in self.fsdp_modules:
            m.reshard()  # drops a stale unsharded copy (the optimizer steps the shards)
        for m in self.fsdp_modules:
            m.set_reshard_after_forward(False, recurse=False)
            m.unshard()
        self.gathered = True

    def begin_update(self) -> None:
        """fsdp: back to sharded parameters, resharded after every forward."""
        for m in self.fsdp_modules:
            m.set_reshard_after_forward(True, recurse=False)
            m.reshard()
        self.gathered = False

    # ------------------------------------------------------------------ backward
    def share(self, mb: list, sel: list[int], rank: int | None = None, by_prefix: bool = False) -> list[int]:
        """The indices of `sel` (into the minibatch `mb`) that rank `rank` backpropagates.
        `by_prefix`: sequences that share a prompt prefix stay together (the learner shares it)."""
        r = self.rank if rank is None else rank
        lengths = [len(mb[i].ids) for i in sel]
        if by_prefix:
            clusters, shared = prefix_clusters([mb[i] for i in sel])
            return [sel[j] for j in cluster_share(lengths, clusters, shared, r, self.world)]
        return [sel[j] for j in token_share(lengths, r, self.world)]

    def backward(self, updater, mb: list, w: torch.Tensor, sel: list[int], stats: dict | None) -> dict:
        """This rank's share of the gradient of the minibatch's sequences `sel` (weights w over the
        whole minibatch), summed over ranks into every rank's (ddp) or shard's (fsdp) .grad.
        Returns this rank's loss sums (`Updater.backward`); `sum_tree` adds the ranks'."""
        if self.strategy == "ddp":
            mine = self.share(mb, sel, by_prefix=updater.cfg.share_prefixes)
            t0 = time.perf_counter()
            sums = updater.backward([mb[i] for i in mine], w[mine], stats) if mine else {}
            self.busy_s += time.perf_counter() - t0
            self.waits()
            self.all_reduce_grads(updater)
            return sums
        t0 = time.perf_counter()
        sums = self._fsdp_backward(updater, mb, w, sel, stats)
        self.busy_s += time.perf_counter() - t0
        return sums

    def _fsdp_backward(self, updater, mb: list, w: torch.Tensor, sel: list[int], stats: dict | None) -> dict:
        """Slot by slot, micro-batch by micro-batch, in lockstep: FSDP's hooks are collectives."""
        policies, cfg = updater.policies, updater.cfg
        pos = {id(s): i for i, s in enumerate(mb)}
        sums: dict = {}
        for slot in policies.slots:
            in_slot = [i for i in sel if policies.slot(mb[i].role) == slot]
            if not in_slot:  # no rank has a sequence of this slot: no rank runs it
                continue
            micros = [micro_batches([mb[i] for i in self.share(mb, in_slot, r)], cfg.micro_batch_tokens,
                                    sort=cfg.length_buckets, max_pad=cfg.max_pad_fraction if cfg.length_buckets else 1.0)
                      for r in range(self.world)]
            for micro in micros[self.rank]:
                sums = sum_tree([sums, updater.backward(micro, w[[pos[id(s)] for s in micro]], stats)])
            filler = min((mb[i] for i in in_slot), key=lambda s: len(s.ids))
            for _ in range(max(map(len, micros)) - len(micros[self.rank])):
                updater.backward([filler], torch.zeros(1), None)  # weight 0: a zero gradient; sums dropped
        return sums

    def all_reduce_grads(self, updater) -> None:
        """ddp: SUM every trainable parameter's gradient over ranks; None where no rank has one."""
        params = list({id(p): p for slot in updater.policies.slots for p in updater.policies.parameters(slot)}.values())
        self.sum_gradients(params)

    def sum_gradients(self, params: list[torch.nn.Parameter], value: float = 0.0) -> float:
        """SUM over ranks of each gradient of `params` (None where no rank has one) and of
        `value` (this rank's loss, say), in one all-reduce; returns the summed value. Every rank
        passes the same parameters in the same order."""
        if not params:
            return value
        grads = flat_grads(params)
        flags = torch.tensor([p.grad is not None for p in params], dtype=params[0].dtype, device=params[0].device)
        extra = torch.tensor([value], dtype=params[0].dtype, device=params[0].device)
        flat = torch.cat([*grads, flags, extra])  # [sum numel + P + 1]
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        offset = 0
        for k, p in enumerate(params):
            n = p.numel()
            p.grad = flat[offset:offset + n].view_as(p).clone() if flat[-len(params) - 1 + k] > 0 else None
            offset += n
        return float(flat[-1])

    # ------------------------------------------------------------------ norms
    def grad_norm(self, params: list[torch.nn.Parameter]) -> float:
        """L2 norm of the (summed) gradients of `params`: fsdp adds the shards' squares over ranks."""
        device = params[0].device if params else torch.device("cpu")  # nccl reduces device tensors only
        total = torch.zeros((), dtype=torch.float64, device=device)
        for p in params:
            if p.grad is not None:
                g = p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad
                total += g.detach().double().pow(2).sum()
        if self.strategy == "fsdp":
            dist.all_reduce(total, op=dist.ReduceOp.SUM)
        return float(total.sqrt())

    def clip(self, params: list[torch.nn.Parameter], max_norm: float) -> float:
        """clip_grad_norm_ (which reduces the DTensor gradients of fsdp over ranks) -> the norm."""
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)

    # ------------------------------------------------------------------ checkpoints
    def full_state(self, policies, optimizers: dict) -> tuple[dict, dict]:
        """Every slot's weights (PolicySet.state_tensors groups) and optimizer state
        (Optimizer.state_dict, indexed by parameter position), unsharded, in the single-process
        format: on rank 0; ({}, {}) on the others. A collective: every rank calls it."""
        if self.strategy != "fsdp":  # ddp: every rank holds it all
            if self.rank != 0:
                return {}, {}
            return policies.state_tensors(), {slot: opt.state_dict() for slot, opt in optimizers.items()}
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
        (model,) = policies.modules()
        full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        names = {group: list(sd) for group, sd in policies.state_tensors().items()}
        optims = {slot: _full_optimizer_state(opt) for slot, opt in optimizers.items()}
        self.gathered = False  # state_dict() resharded the parameters
        self.gather()
        if self.rank != 0:
            return {}, {}
        return {group: {n: full[n] for n in ns} for group, ns in names.items()}, optims

    def load_full_state(self, policies, optimizers: dict, groups: dict, optim_states: dict, source: str) -> None:
        """Load a checkpoint in the single-process format (written under any strategy) on every
        rank: each rank reads the files and keeps its own shard. `optim_states`: slot -> state."""
        if self.strategy != "fsdp":
            policies.load_state_tensors(groups, source)
            for slot, opt in optimizers.items():
                opt.load_state_dict(optim_states[slot])
            return
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
        want = list(policies.state_tensors())
        missing = [g for g in want if g not in groups]
        if missing:
            raise KeyError(f"{source}: checkpoint has no {', '.join(missing)} (policy.sharing={policies.sharing}, "
                           f"roles {policies.role_types}; it holds {sorted(groups)})")
        (model,) = policies.modules()
        flat = {n: t for g in want for n, t in groups[g].items()}
        unknown = sorted(set(flat) - set(model.state_dict()))
        if unknown:
            raise KeyError(f"{source}: weights do not match the model (unexpected {unknown[:3]})")
        set_model_state_dict(model, flat, options=StateDictOptions(full_state_dict=True, strict=False))
        for slot, opt in optimizers.items():
            opt.load_state_dict(_sharded_optimizer_state(opt, optim_states[slot]))
        self.gathered = False
        self.gather()


def _full_optimizer_state(opt: torch.optim.Optimizer) -> dict:
    """opt.state_dict() with every sharded (DTensor) state tensor gathered whole onto the CPU.
    All ranks gather the same tensors in the same order (their states have one structure)."""
    sd = opt.state_dict()
    state = {}
    for i in sorted(sd["state"]):
        state[i] = {k: (v.full_tensor() if hasattr(v, "full_tensor") else v).detach().cpu()
                    if isinstance(v, torch.Tensor) else v for k, v in sorted(sd["state"][i].items())}
    return {"state": state, "param_groups": sd["param_groups"]}


def _sharded_optimizer_state(opt: torch.optim.Optimizer, sd: dict) -> dict:
    """A full optimizer state_dict cut to this rank's shards: each full state tensor shaped like
    its (DTensor) parameter becomes a DTensor laid out like it, from the local copy (no traffic:
    every rank read the same file)."""
    from torch.distributed.tensor import DTensor, distribute_tensor
    params = [p for g in opt.param_groups for p in g["params"]]
    state = {}
    for i, st in sd["state"].items():
        p = params[int(i)]
        state[i] = {k: distribute_tensor(v.to(p.device), p.device_mesh, p.placements, src_data_rank=None)
                    if isinstance(p, DTensor) and isinstance(v, torch.Tensor) and v.shape == p.shape else v
                    for k, v in st.items()}
    return {"state": state, "param_groups": sd["param_groups"]}
