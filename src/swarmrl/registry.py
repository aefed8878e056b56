"""Registries: config names -> the classes and functions they select, and `module:Name` plugins.

Every extension point (tasks, scenarios, advantage estimators, losses, aggregations) is a
`Registry`. Built-ins register themselves with a decorator, or lazily by a `module:Name`
string when importing them pulls in heavy dependencies (math-verify, the sandbox). A config
value is either a registered name or a spec that loads a user's object:

    task.name=sorting                    # a registered name
    task.name=my_pkg.tasks:SortTask      # an importable module
    task.name=examples/sort_task.py:SortTask   # a file (resolved against the working directory)

A loaded class is checked against the registry's protocol (every method it must have) when
it is resolved, so a plugin missing `grade` fails before training starts, naming `grade`.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any, Callable, Generic, TypeVar

from swarmrl.config_schema import ConfigError

T = TypeVar("T")


class PluginError(ConfigError):
    """A registry name or plugin spec is wrong; the message names it and what was expected."""


def load_spec(spec: str) -> Any:
    """`package.module:Name` or `path/to/file.py:Name` -> the object. Raises PluginError."""
    module_part, sep, attr = spec.rpartition(":")
    if not sep or not module_part or not attr:
        raise PluginError(f"plugin spec {spec!r}: expected `package.module:Name` or `path/to/file.py:Name`")
    module = _load_file(module_part, spec) if module_part.endswith(".py") else _import(module_part, spec)
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = sorted(n for n in dir(module) if not n.startswith("_"))
            raise PluginError(f"plugin spec {spec!r}: {module_part} has no {attr!r} (it defines {names[:12]})")
        obj = getattr(obj, part)
    return obj


def _import(name: str, spec: str):
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise PluginError(f"plugin spec {spec!r}: cannot import {name!r} ({e})") from e


def _load_file(path_text: str, spec: str):
    """Import a file once per absolute path, under a stable module name, so objects defined in
    it pickle by reference (Ray workers load the same file from the same config)."""
    path = Path(path_text).expanduser().resolve()
    if not path.is_file():
        raise PluginError(f"plugin spec {spec!r}: no file {path}")
    name = f"swarmrl_plugin_{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:10]}"
    if name in sys.modules:
        return sys.modules[name]
    loader_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module
    try:
        loader_spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[name]
        raise PluginError(f"plugin spec {spec!r}: importing {path} failed: {type(e).__name__}: {e}") from e
    return module


def is_spec(value: str) -> bool:
    return ":" in value


class Registry(Generic[T]):
    """Names -> objects of one kind. `required`: methods a class must define (its protocol)."""

    def __init__(self, kind: str, required: tuple[str, ...] = (), classes: bool = True):
        self.kind = kind
        self.required = required
        self.classes = classes  # entries are classes (checked against `required`) or plain callables
        self._entries: dict[str, Any] = {}  # name -> object, or "module:Name" still to import

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: `@TASKS.register("arith") class ArithTask: ...`."""
        def deco(obj: T) -> T:
            self.add(name, obj)
            return obj
        return deco

    def add(self, name: str, obj: Any) -> None:
        if not name or is_spec(name):
            raise PluginError(f"{self.kind} name {name!r}: must be non-empty and contain no ':'")
        if name in self._entries:
            raise PluginError(f"two {self.kind}s registered as {name!r}: {self._describe(self._entries[name])} "
                              f"and {self._describe(obj)}")
        if not isinstance(obj, str):
            self.check(obj, name)
        self._entries[name] = obj

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def get(self, name: str) -> T:
        """A registered name or a `module:Name` spec -> the checked object."""
        if name in self._entries:
            obj = self._entries[name]
            if isinstance(obj, str):  # a lazy built-in
                obj = self._entries[name] = self.check(load_spec(obj), name)
            return obj
        if is_spec(name):
            return self.check(load_spec(name), name)
        raise PluginError(f"unknown {self.kind} {name!r}; registered: {', '.join(self.names())} "
                          "(or a plugin: `package.module:Name` or `path/to/file.py:Name`)")

    def check(self, obj: Any, name: str) -> Any:
        if self.classes and not isinstance(obj, type):
            raise PluginError(f"{self.kind} {name!r}: expected a class, got {type(obj).__name__}")
        if not callable(obj):
            raise PluginError(f"{self.kind} {name!r}: expected a callable, got {type(obj).__name__}")
        missing = [m for m in self.required if not callable(getattr(obj, m, None))]
        if missing:
            raise PluginError(f"{self.kind} {name!r} ({self._describe(obj)}) lacks method(s) of the {self.kind} "
                              f"protocol: {', '.join(missing)}")
        return obj

    @staticmethod
    def _describe(obj: Any) -> str:
        if isinstance(obj, str):
            return obj
        return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__name__)}"
