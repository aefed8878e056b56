"""The pure parts of the sharded learner (rl/sharded.py): who backpropagates what, and the sums."""

from __future__ import annotations

import numpy as np
import pytest

from swarmrl.rl.sharded import cluster_share, contiguous_share, sum_tree, token_share


@pytest.mark.parametrize("world", [1, 2, 3, 5])
def test_token_shares_partition_the_sequences_and_balance_tokens(world):
    lengths = np.random.default_rng(0).integers(1, 500, 37).tolist()
    shares = [token_share(lengths, r, world) for r in range(world)]
    assert sorted(i for s in shares for i in s) == list(range(len(lengths)))  # each sequence exactly once
    loads = [sum(lengths[i] for i in s) for s in shares]
    assert max(loads) - min(loads) <= max(lengths), loads  # greedy longest-first: within one sequence
    assert all(s == sorted(s) for s in shares)


def test_token_share_depends_on_the_lengths_alone():
    lengths = [5, 5, 5, 9, 1, 9]
    assert token_share(lengths, 0, 2) == token_share(list(lengths), 0, 2) == [0, 2, 3]
    assert token_share(lengths, 1, 2) == [1, 4, 5]
    assert token_share([], 0, 2) == [] and token_share([3], 1, 2) == []  # a rank may have nothing
    with pytest.raises(ValueError, match="rank 2"):
        token_share(lengths, 2, 2)


def test_cluster_shares_keep_a_shared_prefix_on_one_rank_and_weigh_it_once():
    # clusters: {0, 2, 4} share 80 tokens (cost 80 + 20 + 20 + 20 = 140), {1} alone (120), {3} alone (30)
    lengths, clusters, shared = [100, 120, 100, 30, 100], [0, 1, 0, 2, 0], [80, 0, 80, 0, 80]
    assert cluster_share(lengths, clusters, shared, 0, 2) == [0, 2, 4]  # the heaviest cluster first
    assert cluster_share(lengths, clusters, shared, 1, 2) == [1, 3]  # 120 + 30 = 150 against 140
    assert cluster_share(lengths, clusters, shared, 0, 1) == [0, 1, 2, 3, 4]
    assert cluster_share([], [], [], 1, 2) == []


def test_contiguous_shares_match_array_split():
    assert [contiguous_share(5, r, 2) for r in range(2)] == [[0, 1, 2], [3, 4]]
    assert [contiguous_share(1, r, 3) for r in range(3)] == [[0], [], []]


def test_sum_tree_adds_nested_sums_key_by_key():
    a = {"loss": 1.0, "tokens": 3.0, "ceo": {"nll": 2.0}}
    b = {"loss": 0.5, "expert": {"nll": 1.0}, "ceo": {"nll": 0.25, "tokens": 4.0}}
    assert sum_tree([a, b, {}]) == {"loss": 1.5, "tokens": 3.0, "ceo": {"nll": 2.25, "tokens": 4.0},
                                    "expert": {"nll": 1.0}}
    assert a == {"loss": 1.0, "tokens": 3.0, "ceo": {"nll": 2.0}}  # inputs untouched


def test_rank_idle_is_the_share_of_rank_time_spent_waiting_for_the_slowest():
    from swarmrl.rl.sharded import rank_idle
    # one span, ranks busy 3 s and 1 s: the phase lasts 3 s on each, 6 rank-seconds, of which 2 idle
    assert rank_idle("rollout", [[3.0], [1.0]]) == {"perf/rollout_rank_idle": 1.0 - 2.0 / 3.0,
                                                    "perf/rollout_rank_busy_max_s": 3.0}
    assert rank_idle("update", [[2.0], [2.0]])["perf/update_rank_idle"] == 0.0
    # two spans whose totals balance (4 s each): each rank waits 2 s at one of them, so the phase
    # lasts 3 + 3 s per rank, 12 rank-seconds, of which 4 idle
    assert rank_idle("warmstart", [[3.0, 1.0], [1.0, 3.0]]) == {"perf/warmstart_rank_idle": 1.0 - 8.0 / 12.0,
                                                                "perf/warmstart_rank_busy_max_s": 6.0}
    assert rank_idle("update", [[2.0]]) == {} and rank_idle("update", [[0.0], [0.0]]) == {}
