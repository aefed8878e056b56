"""paths.cache_dir: configured value > $SWARMRL_CACHE_DIR > $XDG_CACHE_HOME > platform default;
never the working directory; an unwritable directory is a ConfigError before any work."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from swarmrl.config import ConfigError, load_config
from swarmrl.paths import cache_dir


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No cache variables set; HOME in tmp so the default is never the real home."""
    for var in ("SWARMRL_CACHE_DIR", "XDG_CACHE_HOME", "LOCALAPPDATA"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: tmp_path / "home"))
    return tmp_path


def test_precedence(clean_env, monkeypatch):
    tmp = clean_env
    monkeypatch.setattr(sys, "platform", "linux")
    assert cache_dir(create=False) == tmp / "home" / ".cache" / "swarmrl"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp / "xdg"))
    assert cache_dir(create=False) == tmp / "xdg" / "swarmrl"
    monkeypatch.setenv("SWARMRL_CACHE_DIR", str(tmp / "env"))
    assert cache_dir(create=False) == tmp / "env"
    assert cache_dir(str(tmp / "cfg"), create=False) == tmp / "cfg"
    assert cache_dir("~/c", create=False) == tmp / "home" / "c"
    monkeypatch.setenv("SWARMRL_CACHE_DIR", "  ")  # blank counts as unset
    assert cache_dir(create=False) == tmp / "xdg" / "swarmrl"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # the XDG spec: ignored when relative
    assert cache_dir(create=False) == tmp / "home" / ".cache" / "swarmrl"


def test_platform_defaults(clean_env, monkeypatch):
    tmp = clean_env
    monkeypatch.setattr(sys, "platform", "darwin")
    assert cache_dir(create=False) == tmp / "home" / "Library" / "Caches" / "swarmrl"
    monkeypatch.setattr(sys, "platform", "win32")
    assert cache_dir(create=False) == tmp / "home" / "AppData" / "Local" / "swarmrl" / "Cache"
    monkeypatch.setenv("LOCALAPPDATA", str(tmp / "local"))
    assert cache_dir(create=False) == tmp / "local" / "swarmrl" / "Cache"


def test_never_the_working_directory(clean_env, monkeypatch):
    monkeypatch.chdir(clean_env)
    cfg = load_config(None)
    assert cfg.warmstart.cache_dir == ""
    d = cache_dir(cfg.warmstart.cache_dir, create=False)
    assert d.is_absolute() and Path.cwd() != d


def test_created_when_missing(tmp_path):
    d = cache_dir(str(tmp_path / "a" / "b"))
    assert d.is_dir() and not list(d.iterdir())  # the write check leaves nothing behind


def test_suite_cache_is_not_the_home_cache():
    # conftest.py points SWARMRL_CACHE_DIR at a per-session tmp dir (unless the caller set one)
    assert os.environ.get("SWARMRL_CACHE_DIR")
    assert cache_dir(create=False) != Path.home() / ".cache" / "swarmrl"


def _unwritable(tmp_path: Path) -> Path:
    """A directory nobody can write to. chmod does not stop root, so then use a path under a
    regular file, which cannot be created by anyone."""
    if getattr(os, "geteuid", lambda: -1)() == 0:
        (tmp_path / "file").write_text("")
        return tmp_path / "file" / "sub"
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    return ro / "sub"


@pytest.mark.parametrize("source", ["config", "env"])
def test_unwritable_is_a_config_error(tmp_path, monkeypatch, source):
    bad = _unwritable(tmp_path)
    try:
        if source == "env":
            monkeypatch.setenv("SWARMRL_CACHE_DIR", str(bad))
            with pytest.raises(ConfigError) as e:
                cache_dir("")
            assert "$SWARMRL_CACHE_DIR" in str(e.value)
        else:
            with pytest.raises(ConfigError) as e:
                cache_dir(str(bad))
            assert "warmstart.cache_dir" in str(e.value)
        msg = str(e.value)
        assert str(bad) in msg and "SWARMRL_CACHE_DIR=" in msg and "warmstart.cache_dir=" in msg
    finally:
        if (tmp_path / "ro").exists():
            (tmp_path / "ro").chmod(0o700)


def test_warm_start_fails_on_an_unwritable_cache_before_any_work(tmp_path, monkeypatch):
    from swarmrl.policy import warmstart
    bad = _unwritable(tmp_path)
    monkeypatch.setattr(warmstart, "build_tiny_policy", lambda *a, **k: pytest.fail("work started"))
    cfg = load_config(None, [f"warmstart.cache_dir={bad}"])
    try:
        with pytest.raises(ConfigError, match="not writable"):
            warmstart.warm_start(cfg, log=lambda *_: None)
    finally:
        if (tmp_path / "ro").exists():
            (tmp_path / "ro").chmod(0o700)

