"""Every random stream of a run, derived in one place from (run seed, index, stream name).

Each stream is a function of the run's seed and a position (a step, a wave, a slot) alone,
never of process, thread or batch: that is what makes a run resume exactly and a rollout
sample the same tokens in any process (docs/ARCHITECTURE.md, "Invariants"). The mixing
constants are the ones runs have always used, so seeds (and results) stay comparable
across versions; a new stream gets a new name here, never a new constant at a call site.
"""

from __future__ import annotations

import zlib

import numpy as np

# stream -> how (seed, *index) becomes an integer seed or a numpy Generator
_INT_STREAMS = {
    "step_sampling": lambda seed, step: seed * 1_000_003 + step,  # a training step's rollouts
    "wave": lambda seed, wave: seed * 100_003 + wave,  # one causal wave of a rollout
    "slot": lambda seed, k: seed * 31 + k,  # full per-role model copy k (isolated_full)
    "engine_row": lambda seed, i: seed * 1009 + i,  # a vLLM row without its own seed
}
_RNG_STREAMS = {
    "problems": lambda seed, step: [seed, step],  # a training step's problems
    "minibatch_order": lambda seed, step: [seed, step, 1],  # the update's minibatch permutation
    "caps": lambda seed, step: [seed, step, 3],  # the smaller expert caps of a step
    "spans": lambda seed, step: [seed, step, 4],  # the spans of control of a step (rl.spans)
    "demo_anchor": lambda seed, step: [seed, step, 5],  # a step's anchoring demonstrations (rl/anchor.py)
    "eval_problems": lambda seed: seed,  # held-out problems (seed = task.eval_seed)
    "demos": lambda seed: seed,  # scripted demonstrations of the warm start
    "demo_slips": lambda seed: seed,  # the scripted workflow solvers' deliberate slips
    "warmstart_order": lambda seed: seed,  # the warm start's batch order
}


def seed_for(stream: str, seed: int, *index: int) -> int:
    """An integer seed of `stream` at `index` (e.g. `seed_for("wave", run_seed, wave)`)."""
    if stream not in _INT_STREAMS:
        raise KeyError(f"unknown integer seed stream {stream!r} (streams: {sorted(_INT_STREAMS)})")
    return _INT_STREAMS[stream](seed, *index)


def rng_for(stream: str, seed: int, *index: int) -> np.random.Generator:
    """A numpy Generator of `stream` at `index` (e.g. `rng_for("problems", run_seed, step)`)."""
    if stream not in _RNG_STREAMS:
        raise KeyError(f"unknown generator stream {stream!r} (streams: {sorted(_RNG_STREAMS)})")
    return np.random.default_rng(_RNG_STREAMS[stream](seed, *index))


def turn_seed(wave_seed: int, rollout_index: int, agent_name: str, agent_turn: int) -> int:
    """The sampling seed of one agent turn: the wave's seed and the turn's identity (rollout,
    agent, its turn number), never the batch it is sampled in. crc32, not `hash`: Python
    salts str hashes per process."""
    name = zlib.crc32(agent_name.encode())
    return int(np.random.SeedSequence([wave_seed % (1 << 63), rollout_index, name, agent_turn]).generate_state(1)[0])
