"""Typed, validated TOML settings whose schema is derived from a defaults file.  Stdlib only.

The defaults file is the one source of defaults *and* of the schema: a key's type is the type of
its default value, so a key added to the defaults with its default is known at once.  A few keys
need more than that (a union such as ``gpus = 8 | "slurm"``, an enumeration, the element type of
a list whose default is empty, a table with free-form keys); the caller declares those
exceptions by dotted path.  Validation errors name the file, the dotted key, what was expected
and what was found; unknown keys are errors (a typo must never silently become a default).

Conventions applied to every derived number (so new keys get them too): numbers are >= 0, and
keys ending in ``_s`` (durations) or ``_bytes`` must be > 0.  ``int`` is accepted where a float
is expected (and converted); ``bool`` is never a number.
"""

from __future__ import annotations

import copy
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aegis_slurm.errors import ConfigError


class Spec:
    """One key's (or one table's) type.  ``check`` returns the value, converted, or raises."""

    def check(self, value: Any, where: str) -> Any:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


def _tname(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(
        type(value),
        "a list" if isinstance(value, list) else "a table" if isinstance(value, dict) else "?",
    ) + (f" ({value!r})" if isinstance(value, (bool, int, float, str)) else "")


@dataclass(frozen=True)
class Scalar(Spec):
    type: type
    min: float | None = None
    min_exclusive: bool = False
    max: float | None = None

    def check(self, value: Any, where: str) -> Any:
        ok = isinstance(value, self.type) and not (
            self.type is not bool and isinstance(value, bool)
        )
        if self.type is float and isinstance(value, int) and not isinstance(value, bool):
            value, ok = float(value), True
        if not ok:
            raise ConfigError(f"{where} must be {self.describe()}, not {_tname(value)}")
        if self.min is not None and (value <= self.min if self.min_exclusive else value < self.min):
            rel = ">" if self.min_exclusive else ">="
            raise ConfigError(f"{where} must be {rel} {self.min:g}, not {value!r}")
        if self.max is not None and value > self.max:
            raise ConfigError(f"{where} must be <= {self.max:g}, not {value!r}")
        return value

    def describe(self) -> str:
        return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}[
            self.type
        ]


@dataclass(frozen=True)
class Choice(Spec):
    values: tuple[Any, ...]

    def check(self, value: Any, where: str) -> Any:
        if isinstance(value, bool) or value not in self.values:
            raise ConfigError(f"{where} must be {self.describe()}, not {_tname(value)}")
        return value

    def describe(self) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)


@dataclass(frozen=True)
class Union(Spec):
    options: tuple[Spec, ...]

    def check(self, value: Any, where: str) -> Any:
        for o in self.options:
            try:
                return o.check(value, where)
            except ConfigError:
                continue
        raise ConfigError(f"{where} must be {self.describe()}, not {_tname(value)}")

    def describe(self) -> str:
        return " or ".join(o.describe() for o in self.options)


@dataclass(frozen=True)
class ListOf(Spec):
    item: Spec

    def check(self, value: Any, where: str) -> Any:
        if not isinstance(value, list):
            raise ConfigError(f"{where} must be {self.describe()}, not {_tname(value)}")
        return [self.item.check(v, f"{where}[{i}]") for i, v in enumerate(value)]

    def describe(self) -> str:
        return f"a list of {self.item.describe()}s".replace("a list of a ", "a list of ")


@dataclass(frozen=True)
class Table(Spec):
    """A table with known keys; a site file may give any subset of them."""

    keys: dict[str, Spec] = field(default_factory=dict)

    def check(self, value: Any, where: str) -> Any:
        if not isinstance(value, dict):
            raise ConfigError(f"{where or 'the file'} must be a table, not {_tname(value)}")
        out = {}
        for k, v in value.items():
            sub = f"{where}.{k}" if where else k
            if k not in self.keys:
                known = ", ".join(sorted(self.keys))
                raise ConfigError(f"unknown key {sub} (known here: {known})")
            out[k] = self.keys[k].check(v, sub)
        return out

    def describe(self) -> str:
        return "a table"


@dataclass(frozen=True)
class MapOf(Spec):
    """A table with free-form keys (check names, partitions, probe names)."""

    value: Spec

    def check(self, value: Any, where: str) -> Any:
        if not isinstance(value, dict):
            raise ConfigError(f"{where} must be a table, not {_tname(value)}")
        return {k: self.value.check(v, f"{where}.{k}") for k, v in value.items()}

    def describe(self) -> str:
        return "a table"


def derive(value: Any, path: str = "", declared: dict[str, Spec] | None = None) -> Spec:
    """The spec of a default value (recursively), declared exceptions taking precedence."""
    declared = declared or {}
    if path in declared:
        return declared[path]
    name = path.rsplit(".", 1)[-1]
    if isinstance(value, dict):
        keys = {k: derive(v, f"{path}.{k}" if path else k, declared) for k, v in value.items()}
        for p, spec in declared.items():  # declared keys absent from the defaults (tables)
            parent, _, leaf = p.rpartition(".")
            if parent == path and leaf not in keys:
                keys[leaf] = spec
        return Table(keys)
    if isinstance(value, list):
        if not value:
            raise ConfigError(f"default of {path} is an empty list: declare its element type")
        return ListOf(derive(value[0], path + "[]", declared))
    if isinstance(value, bool):
        return Scalar(bool)
    if isinstance(value, (int, float)):
        positive = name.endswith(("_s", "_bytes"))
        return Scalar(type(value), 0, positive)
    if isinstance(value, str):
        return Scalar(str)
    raise ConfigError(f"default of {path}: unsupported TOML type {type(value).__name__}")


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Tables merge key by key, everything else (lists too) replaces."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def read(path: str | Path) -> dict[str, Any]:
    """A TOML file as a dict; unreadable or invalid TOML is a :class:`ConfigError`."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise ConfigError(f"cannot read config {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config {path} is not valid TOML: {e}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"config {path} is not UTF-8: {e.reason}") from None


def load(defaults: dict[str, Any], schema: Spec, site: str | Path | None) -> dict[str, Any]:
    """``defaults`` with the validated ``site`` file merged over them."""
    defaults = copy.deepcopy(defaults)  # callers may mutate what they get
    if site is None:
        return defaults
    try:
        checked = schema.check(read(site), "")
    except ConfigError as e:
        if str(e).startswith(("cannot read config", "config ")):
            raise
        raise ConfigError(f"config {site}: {e}") from None
    return merge(defaults, checked)
