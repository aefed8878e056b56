"""The bounded pool, the start-up check, and the infra-error gate."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from swarmrl.config import SandboxConfig
from swarmrl.sandbox import InfraErrorRateExceeded, SandboxPool, check_infra_errors, make_pool
from swarmrl.sandbox.pool import slot_uids


def test_map_keeps_order_and_runs_in_parallel(pool):
    jobs = [{"solution": f"import time\ndef f():\n    time.sleep(0.3)\n    return {i}\n", "entry_point": "f",
             "tests": [{"kind": "assert", "code": f"assert f() == {i if i % 2 else -1}"}]} for i in range(4)]
    t0 = time.monotonic()
    got = pool.map(jobs)
    took = time.monotonic() - t0
    assert [g.passed for g in got] == [[False], [True], [False], [True]]
    serial = sum(g.wall_s for g in got)
    assert took < 0.8 * serial  # two workers overlap the sleeps


def test_slot_uids_are_unprivileged_and_distinct():
    uids = slot_uids(8, pid=12345)
    assert uids == list(range(200_000 + 12345 * 64, 200_000 + 12345 * 64 + 8))
    with pytest.raises(ValueError):
        SandboxPool(None, "bwrap", 0)


def test_unsafe_local_warns_and_still_grades():
    with pytest.warns(RuntimeWarning, match="WITHOUT isolation"):
        p = make_pool(SandboxConfig(mode="unsafe_local", workers=1))
    try:
        got = p.run({"solution": "def f():\n    return 2\n", "entry_point": "f",
                     "tests": [{"kind": "assert", "code": "assert f() == 2"}]})
        assert got.status == "pass"
    finally:
        p.close()


def _rollout(infra: int):
    return SimpleNamespace(counters={"infra_errors": infra, "wrong_submits": 1})


def test_check_infra_errors_mask_and_rate():
    keep, rate = check_infra_errors([_rollout(0), _rollout(2), _rollout(0), _rollout(0)], max_rate=0.25)
    assert keep == [True, False, True, True] and rate == 0.25  # 1 of 4 rollouts; at the limit is allowed
    assert check_infra_errors([], 0.0) == ([], 0.0)


def test_check_infra_errors_aborts_past_threshold():
    with pytest.raises(InfraErrorRateExceeded, match=r"2 of 4 rollouts \(50%\).*max_infra_error_rate=25%"):
        check_infra_errors([_rollout(1), _rollout(1), _rollout(0), _rollout(0)], max_rate=0.25)


def test_sandbox_config_section_is_validated():
    from swarmrl.config import ConfigError, config_from_dict

    cfg = config_from_dict({"task": {"name": "code", "code_scoring": "all_or_nothing"},
                            "sandbox": {"mode": "unsafe_local", "memory_mb": 256, "max_infra_error_rate": 0.05}})
    assert (cfg.sandbox.mode, cfg.sandbox.memory_mb, cfg.task.code_scoring) == ("unsafe_local", 256, "all_or_nothing")
    with pytest.raises(ConfigError, match="sandbox.workers must be in"):
        config_from_dict({"sandbox": {"workers": 0}})
    with pytest.raises(ConfigError, match="did you mean 'wall_time_s'"):
        config_from_dict({"sandbox": {"wal_time_s": 3}})
    with pytest.raises(ConfigError, match=r"sandbox.mode: 'docker' is not one of"):
        config_from_dict({"sandbox": {"mode": "docker"}})


def test_close_is_idempotent_and_refuses_new_jobs():
    p = SandboxPool(None, "unsafe_local", 1)
    p.close()
    p.close()
    with pytest.raises(RuntimeError, match="shutdown"):
        p.map([{"solution": "", "entry_point": "f", "tests": []}])
