"""The runtime's event loop under continuous batching (policy/sampler.py `DecodeStream`).

Kept apart from collective/runtime.py, whose wave loop (`Runtime.run`) is the reference this
loop must reproduce: same turns, same per-turn seeds (tests/collective/test_runtime_stream.py).
It drives the runtime only through its public step API (`next_turns`, `apply`).
"""

from __future__ import annotations

from swarmrl.seeds import seed_for


def run_stream(runtime, rollouts: list, stream, seed: int, progress=None) -> list:
    """Continuous batching: each rollout hands in its next causal wave as soon as its own
    turns are back, instead of waiting for the slowest turn of every rollout. A rollout's
    k-th wave gets the same seed as global wave k of `Runtime.run`'s loop (every live rollout
    takes part in every wave there), so both loops sample the same turns."""
    waves = {id(r): 0 for r in rollouts}
    back: dict[int, list] = {}  # rollout -> (request, reply) of its wave in flight
    left: dict[int, int] = {}  # rollout -> replies still to come

    def hand_in(r) -> None:
        requests = [] if r.done else runtime.next_turns(r)
        if requests:
            stream.add(requests, seed_for("wave", seed, waves[id(r)]))
            waves[id(r)] += 1
            back[id(r)], left[id(r)] = [], len(requests)

    for r in rollouts:
        hand_in(r)
    while stream.busy():
        for req, reply in stream.step():
            k = id(req.rollout)
            back[k].append((req, reply))
            left[k] -= 1
            if left[k] == 0:  # the wave is complete: apply in start-time order, as `run` does
                for q, s in sorted(back.pop(k), key=lambda x: (x[0].start, x[0].agent.name)):
                    runtime.apply(q, s)
                hand_in(req.rollout)
                if hasattr(stream, "finished"):  # agents with no turn left: their KV caches can go
                    stream.finished(req.rollout)
                if progress is not None:
                    progress(rollouts)
    return rollouts
