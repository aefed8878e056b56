"""ShardedLearner's bookkeeping that needs no process group: the busy spans behind perf/*_rank_idle."""

from __future__ import annotations

import pytest

from swarmrl.distributed.sharding import ShardedLearner


def _learner(peer_spans: list[float]) -> ShardedLearner:
    """Rank 0 of two, whose all-gather hands back its own object and the peer's spans."""
    learner = object.__new__(ShardedLearner)  # no process group: only the bookkeeping runs
    learner.rank, learner.world, learner.busy_s, learner.busy_spans = 0, 2, 0.0, []
    learner.all_gather = lambda obj: [obj, peer_spans]
    return learner


def test_busy_metrics_measure_the_waits_span_by_span():
    learner = _learner([1.0, 3.0])
    learner.busy_s = 3.0
    learner.waits()  # a collective: 3 s of work before it
    learner.busy_s = 1.0  # work after the last wait: closed by busy_metrics' own gather
    got = learner.busy_metrics("update")
    # spans (3, 1) against (1, 3): 6 s at the slowest pace, 8 of the 12 rank-seconds busy
    assert got == {"perf/update_rank_idle": pytest.approx(1.0 - 8.0 / 12.0), "perf/update_rank_busy_max_s": 6.0}
    assert learner.busy_spans == [] and learner.busy_s == 0.0  # the next phase starts afresh


def test_busy_metrics_fall_back_to_totals_when_the_ranks_marked_different_waits():
    learner = _learner([1.0, 1.0, 2.0])
    learner.busy_s = 3.0
    learner.waits()
    assert learner.busy_metrics("update") == {"perf/update_rank_idle": pytest.approx(1.0 - 3.5 / 4.0),
                                              "perf/update_rank_busy_max_s": 4.0}
