"""Continuous batching (`Runtime._run_stream`): rollouts handing in their next wave while other
rollouts' turns are still decoding give the same rollouts, with the same per-turn seeds, as
the wave-by-wave loop."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st
from runtime_helpers import LAT, NO_DEADLINE, HashActor, latencies, make_runtime, problems, property_settings, transcript


class SeedRecorder(HashActor):
    """The wave loop's actor; records the seed each turn was sampled with."""

    def __init__(self, salt):
        super().__init__(salt)
        self.seeds = {}

    def act(self, requests, seed):
        for q in requests:
            self.seeds[(q.rollout.index, q.agent.name, q.agent.turns)] = seed
        return super().act(requests, seed)


class ShuffledStream:
    """A stream that finishes queued turns in a random order, a random number per step, the
    way a continuous batch finishes short turns before long ones."""

    def __init__(self, actor: HashActor, shuffle_seed: int):
        self.actor, self.rng = actor, random.Random(shuffle_seed)
        self.queue, self.seeds, self.steps = [], {}, 0

    def add(self, requests, seed):
        for q in requests:
            self.seeds[(q.rollout.index, q.agent.name, q.agent.turns)] = seed
        self.queue += list(requests)

    def busy(self):
        return bool(self.queue)

    def step(self):
        self.steps += 1
        self.rng.shuffle(self.queue)
        k = self.rng.randint(0, len(self.queue))
        done, self.queue = self.queue[:k], self.queue[k:]
        return list(zip(done, self.actor.act(done, seed=0)))


class StreamingActor(HashActor):
    def __init__(self, salt, shuffle_seed):
        super().__init__(salt)
        self.stream = ShuffledStream(HashActor(salt), shuffle_seed)

    def open_stream(self):
        return self.stream


def run(actor, salt, n, k, latency, time_limit):
    rt = make_runtime(latency, True, k=k, max_turns_per_agent=6)
    rollouts = [rt.new_rollout(i, i // 2, p, time_limit, 3) for i, p in enumerate(problems(rt, n, seed=salt))]
    rt.run(rollouts, actor, seed=salt)
    return rollouts


@property_settings
@given(salt=st.integers(0, 10_000), n=st.integers(1, 6), k=st.integers(1, 4), latency=latencies,
       time_limit=st.sampled_from([2.0, 5.0, 12.0, NO_DEADLINE]), shuffle=st.integers(0, 100))
def test_streaming_gives_the_wave_loops_rollouts_and_seeds(salt, n, k, latency, time_limit, shuffle):
    waves = SeedRecorder(salt)
    streaming = StreamingActor(salt, shuffle)
    a, b = run(waves, salt, n, k, latency, time_limit), run(streaming, salt, n, k, latency, time_limit)
    for x, y in zip(a, b):
        assert transcript(x) == transcript(y)
    assert streaming.stream.seeds == waves.seeds


def test_the_stream_really_interleaves_rollouts():
    """The check above has teeth: a rollout does hand in its next wave while others still wait."""
    actor = StreamingActor(7, 3)
    seen, orig = [], actor.stream.add
    actor.stream.add = lambda requests, seed: (seen.append((seed, len(actor.stream.queue))), orig(requests, seed))
    run(actor, 7, 4, 3, LAT, NO_DEADLINE)
    assert any(queued > 0 for _, queued in seen[4:])  # added while other turns were in flight


def test_the_runtime_tells_the_stream_which_agents_are_finished():
    """After each applied wave the stream hears about the rollout, so agents with no turn left
    (and every agent of a finished rollout) can have their KV caches dropped."""
    told = []
    actor = StreamingActor(5, 1)
    actor.stream.finished = lambda r: told.append((r.index, r.done))
    rollouts = run(actor, 5, 3, 2, LAT, NO_DEADLINE)
    assert {i for i, _ in told} == {r.index for r in rollouts}
    assert {i for i, done in told if done} == {r.index for r in rollouts}  # the last call saw each rollout finished
