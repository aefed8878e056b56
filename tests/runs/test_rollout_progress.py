"""RolloutProgress: a plain line every `every_s` seconds while rollouts run, with numbers that
can be checked by hand, and the runtime calling it in both of its loops."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace as NS

sys.path.insert(0, str(Path(__file__).parents[1] / "collective"))
from runtime_helpers import LAT, HashActor, make_runtime, problems, transcript  # noqa: E402

from swarmrl.runs.progress import RolloutProgress  # noqa: E402


def fake_rollout(done: bool, turn_ends: list[float], gen_masks: list[list[int]]):
    return NS(done=done, turns=[NS(end=t) for t in turn_ends],
              agents={f"a{i}": NS(gen_mask=m) for i, m in enumerate(gen_masks)})


def test_a_line_is_printed_only_when_due_with_hand_computed_numbers():
    now = [100.0]
    lines = []
    prog = RolloutProgress("scaling", horizon_s=20.0, every_s=30.0, log=lines.append, clock=lambda: now[0])
    rollouts = [fake_rollout(True, [3.0, 9.0], [[1, 1, 0], [1]]),   # finished: counts as 20 s
                fake_rollout(False, [2.0, 7.5, 4.0], [[1, 0, 1, 1]]),  # reached 7.5 s
                fake_rollout(False, [], [[0, 0]])]                     # nothing yet: 0 s
    now[0] = 129.9
    prog(rollouts)
    assert lines == []  # 29.9 s after the start: not due
    now[0] = 130.0
    prog(rollouts)
    # done 1 of 3; clock (20 + 7.5 + 0) / 3 = 9.17 s; tokens 2 + 1 + 3 + 0 = 6; 30 s elapsed
    assert lines == ["  scaling: 1/3 rollouts done, clock 9.2/20 s, 6 tokens, 0:00:30"]
    now[0] = 159.0
    prog(rollouts)
    assert len(lines) == 1  # the next line is due 30 s after the last one, not after the start


class Stream:
    """A stream that finishes every queued turn in one step."""

    def __init__(self, actor):
        self.actor, self.queue = actor, []

    def add(self, requests, seed):
        self.queue += list(requests)

    def busy(self):
        return bool(self.queue)

    def step(self):
        done, self.queue = self.queue, []
        return list(zip(done, self.actor.act(done, seed=0)))


def _run(streaming: bool, progress=None) -> list:
    actor = HashActor(3)
    if streaming:
        actor.open_stream = lambda: Stream(HashActor(3))
    rt = make_runtime(LAT, True, k=3, max_turns_per_agent=4)
    rollouts = [rt.new_rollout(i, i, p, 8.0, 2) for i, p in enumerate(problems(rt, 3, seed=1))]
    return rt.run(rollouts, actor, seed=1, progress=progress)


def test_both_runtime_loops_call_progress_until_every_rollout_is_done():
    for streaming in (False, True):
        seen = []
        watched = _run(streaming, lambda rs: seen.append(sum(r.done for r in rs)))
        assert len(seen) > 1 and seen == sorted(seen)  # called after every wave, progress never goes back
        assert seen[-1] == 3
        # watching changes nothing: the same rollouts as a run without it
        assert [transcript(r) for r in watched] == [transcript(r) for r in _run(streaming)]
