"""Where swarmrl keeps files that outlive a run: the user's cache directory.

`cache_dir()` holds the warm-started models (policy/warmstart.py), keyed by a hash of their
inputs. It is never the working directory by default: an installed `swarmrl demo` run from
anywhere finds the same cache. First match wins:

1. the configured value (`warmstart.cache_dir=...`), when not empty;
2. `$SWARMRL_CACHE_DIR`;
3. `$XDG_CACHE_HOME/swarmrl` (any platform, when set);
4. the platform's cache directory: `~/Library/Caches/swarmrl` on macOS,
   `%LOCALAPPDATA%\\swarmrl\\Cache` on Windows, `~/.cache/swarmrl` elsewhere.

No dependency: this is the small part of `platformdirs` that swarmrl needs.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from swarmrl.config_schema import ConfigError

ENV_VAR = "SWARMRL_CACHE_DIR"
APP = "swarmrl"


def default_cache_dir() -> Path:
    """Steps 2-4 above: the cache directory when the config names none."""
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    if xdg and Path(xdg).is_absolute():  # the XDG spec: a relative value is to be ignored
        return Path(xdg) / APP
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / APP
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA", "").strip()
        return (Path(local) if local else Path.home() / "AppData" / "Local") / APP / "Cache"
    return Path.home() / ".cache" / APP


def cache_dir(configured: str = "", *, create: bool = True) -> Path:
    """The cache directory (module doc for the order). With `create` (the default) it is made
    if missing and checked writable: a ConfigError naming it and the two ways to choose another
    otherwise, before any work that would fill it. `create=False` only says where it would be."""
    where = "warmstart.cache_dir" if configured.strip() else (
        f"${ENV_VAR}" if os.environ.get(ENV_VAR, "").strip() else "the default")
    path = Path(configured.strip()).expanduser() if configured.strip() else default_cache_dir()
    if create:
        check_writable(path, where)
    return path


def check_writable(path: Path, where: str = "") -> None:
    """Make `path` (and its parents) and write a scratch file in it; a ConfigError if either fails."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-test-"):
            pass
    except OSError as e:
        source = f" (from {where})" if where else ""
        raise ConfigError(
            f"cache directory {path}{source} is not writable: {e.strerror or e}; choose another with "
            f"{ENV_VAR}=/some/dir in the environment or the override warmstart.cache_dir=/some/dir") from None
