"""Where RL starts (policy/start.py): the named model, the warm start, or a random tiny model;
and when training's own ranks warm-start first."""

import pytest

from swarmrl.config import ConfigError, load_config
from swarmrl.policy.start import needs_warm_start, policy_init, ranks_warm_start, warm_start_path

TINY_MODEL = ["model.hidden_size=32", "model.num_layers=1", "model.intermediate_size=64"]


def test_warm_start_choice_follows_warmstart_enabled_and_the_protocol(tmp_path):
    assert needs_warm_start(load_config(None))  # the tiny model under compact: warm start
    assert not needs_warm_start(load_config(None, ["warmstart.enabled=never"]))
    assert not needs_warm_start(load_config(None, ["model.name_or_path=some/model"]))
    with pytest.raises(ConfigError, match="warmstart.enabled=always.*model.name_or_path"):
        policy_init(load_config(None, ["model.name_or_path=x", "warmstart.enabled=always"]), print)
    cfg = load_config(None, ["warmstart.enabled=never", f"warmstart.cache_dir={tmp_path}", *TINY_MODEL])
    first, second = policy_init(cfg, lambda *_: None), policy_init(cfg, lambda *_: None)
    assert first == second and (first / "config.json").exists()  # a random init, cached by its config


def test_training_ranks_warm_start_only_when_they_are_launched_uncached_and_as_many(tmp_path, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    base = [f"warmstart.cache_dir={tmp_path}", *TINY_MODEL, "run.threads=2"]
    both = load_config(None, [*base, "learner.processes=2", "warmstart.processes=2"])
    assert ranks_warm_start(both)
    assert not ranks_warm_start(load_config(None, [*base, "learner.processes=1", "warmstart.processes=2"]))
    assert not ranks_warm_start(load_config(None, [*base, "learner.processes=2", "warmstart.processes=1"]))
    assert not ranks_warm_start(load_config(None, [*base, "learner.processes=2", "warmstart.processes=2",
                                                   "warmstart.enabled=never"]))
    # training over nccl cannot keep the warm start's gloo group: the warm start gets ranks of its own
    assert not ranks_warm_start(load_config(None, [*base, "learner.processes=2", "warmstart.processes=2",
                                                   "learner.dist_backend=nccl"]))
    monkeypatch.setenv("WORLD_SIZE", "2")  # a rank: it never launches ranks of its own
    assert not ranks_warm_start(both)
    monkeypatch.delenv("WORLD_SIZE")
    warm_start_path(both).mkdir(parents=True)
    (warm_start_path(both) / "warmstart.json").write_text("{}")  # cached: nothing to train
    assert not ranks_warm_start(both)


def test_a_rank_without_the_cached_warm_start_of_another_rank_count_says_what_fills_it(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    cfg = load_config(None, [f"warmstart.cache_dir={tmp_path}", *TINY_MODEL, "warmstart.processes=1"])
    with pytest.raises(ConfigError, match="swarmrl pretrain.*warmstart.processes to the number of ranks"):
        policy_init(cfg, print)


def test_a_rank_refuses_to_fill_another_warm_start_than_its_caller_waits_for(tmp_path, monkeypatch):
    # The key hashes the demonstrations' source as it is on disk: an edit between the caller's
    # lookup and the ranks' start would have them train into an entry the caller never reads.
    from swarmrl.policy import warmstart
    from swarmrl.distributed.launch import CALLERS_KEY, callers_key, check_callers_key
    cfg = load_config(None, [f"warmstart.cache_dir={tmp_path}", *TINY_MODEL])
    key = warmstart.warmstart_key(cfg)
    assert callers_key(key) == {CALLERS_KEY: key}
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv(CALLERS_KEY, "0123456789abcdef")
    monkeypatch.setattr(warmstart, "_open_ranks", lambda cfg: pytest.fail("the rank went on to train"))
    with pytest.raises(ConfigError, match=f"on this rank \\({key}\\).*looked up \\(0123456789abcdef\\)"):
        warmstart.warm_start(cfg, log=lambda *_: None)
    assert not any(tmp_path.iterdir())  # nothing written
    check_callers_key("0123456789abcdef")  # the same key: fine
    monkeypatch.delenv(CALLERS_KEY)
    check_callers_key(key)  # no caller named one (torchrun started by hand)
    monkeypatch.setenv(CALLERS_KEY, "0123456789abcdef")
    monkeypatch.delenv("WORLD_SIZE")
    check_callers_key(key)  # not a rank: a leftover variable does not bind it


def test_ranks_that_warm_start_are_told_the_key_their_caller_looked_up(tmp_path, monkeypatch):
    from swarmrl.distributed import launch as launch_module
    from swarmrl.distributed.launch import CALLERS_KEY
    from swarmrl.rl import loop
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    started = []
    monkeypatch.setattr(launch_module, "wait_stopping_on_signals", lambda proc: 0)
    monkeypatch.setattr(launch_module.subprocess, "Popen", lambda argv, env: started.append((argv, env)))
    cfg = load_config(None, [f"warmstart.cache_dir={tmp_path}", *TINY_MODEL, "learner.processes=2",
                             "warmstart.processes=2", "run.threads=2"])
    out = tmp_path / "run"
    out.mkdir()  # the ranks would have made it
    assert loop._launch_ranks(cfg, out, None, False, True, None, lambda *_: None)
    assert started[-1][1][CALLERS_KEY] == warm_start_path(cfg).name.removeprefix("warmstart-")
    assert "--init" not in started[-1][0]
    init = tmp_path / "model"
    assert loop._launch_ranks(cfg, out, init, False, True, None, lambda *_: None)  # given a model: no warm start
    assert started[-1][1].get(CALLERS_KEY) is None and str(init) in started[-1][0]
