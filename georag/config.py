"""Config dataclasses from YAML files and ``key=value`` strings, one way for every method.

Every method's defaults live once, in its frozen config dataclass; ``configs/rerank/*.yaml``
mirror them and are read here. Values are checked against the dataclass' fields: an unknown
key, a value of the wrong type or a YAML file that does not parse is a ``ValueError`` naming
the file and the key. YAML is read with ``yaml.safe_load`` (no ``!!python`` tags).

A field may itself be a config dataclass (a learned method's ``fixed`` config): its value is
a mapping of its own fields, and a dotted key (``fixed.alpha``) reaches one of them.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

__all__ = ["config_from_mapping", "config_value", "load_config", "parse_value", "read_yaml"]

T = TypeVar("T")


def read_yaml(path: str | Path, *, argument: str = "path") -> dict:
    """The mapping in a YAML file (empty file: ``{}``); errors name ``argument`` and the file."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{argument}: no such config file {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise ValueError(f"{argument}: {path} is not UTF-8 text ({err.reason})") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(err, "problem", None) or (str(err).splitlines() or ["?"])[0]
        raise ValueError(f"{argument}: {where} is not valid YAML ({problem})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(
            f"{argument}: {path} must hold a mapping of keys to values, got {type(data).__name__}"
        )
    return data


def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _allowed(annotation: Any) -> tuple[type, ...]:
    """The plain types a field annotation admits (``float | None`` -> (float, NoneType))."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return tuple(t for arg in typing.get_args(annotation) for t in _allowed(arg))
    if annotation is None or annotation is type(None):
        return (type(None),)
    if origin is not None:
        return (origin,)
    return (annotation,) if isinstance(annotation, type) else (object,)


def _check_type(cls: type, key: str, value: Any, annotation: Any, where: str) -> Any:
    allowed = _allowed(annotation)
    if (
        object in allowed
        or isinstance(value, allowed)
        and not (isinstance(value, bool) and bool not in allowed)
    ):
        return value
    if float in allowed and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    names = " | ".join(t.__name__ for t in allowed)
    raise ValueError(f"{where}: {key} must be {names}, got {value!r}")


def _nested(annotation: Any) -> type | None:
    """The config dataclass a field holds, or None for a plain field."""
    return annotation if dataclasses.is_dataclass(annotation) else None


def _group_dotted(cls: type, values: Mapping[str, Any], where: str) -> dict:
    """``{"fixed.k": 3}`` as ``{"fixed": {..., "k": 3}}``: the dotted keys set fields of the
    nested config given under ``fixed``, or else of that field's default."""
    types_ = _field_types(cls)
    defaults = {f.name: f for f in dataclasses.fields(cls)}
    grouped = {key: value for key, value in values.items() if "." not in key}
    for key, value in values.items():
        head, dot, rest = key.partition(".")
        if not dot:
            continue
        if head not in types_ or _nested(types_[head]) is None:
            raise ValueError(f"{where}: {key}: {head!r} is not a nested config field")
        inner = grouped.get(head)
        if inner is None:
            f = defaults[head]
            inner = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        if not isinstance(inner, Mapping):
            inner = {f.name: getattr(inner, f.name) for f in dataclasses.fields(inner)}
        grouped[head] = {**inner, rest: value}
    return grouped


def config_from_mapping(cls: type[T], values: Mapping[str, Any], *, where: str = "config") -> T:
    """Build ``cls(**values)`` after checking keys and types against its fields.

    Parameters
    ----------
    cls : dataclass type
    values : mapping
        Field names to values; unknown names are an error. A field holding a config
        dataclass takes a mapping of that config's fields (or an instance); the dotted
        key ``field.key`` sets one of them.
    where : str
        Named in error messages (a file, a CLI flag).
    """
    types_ = _field_types(cls)
    values = _group_dotted(cls, values, where)
    unknown = sorted(set(values) - set(types_))
    if unknown:
        raise ValueError(
            f"{where}: unknown key(s) {unknown} for {cls.__name__} (known: {sorted(types_)})"
        )
    checked = {}
    for key, value in values.items():
        inner = _nested(types_[key])
        if inner is not None and isinstance(value, Mapping):
            checked[key] = config_from_mapping(inner, value, where=f"{where}: {key}")
        else:
            checked[key] = _check_type(cls, key, value, types_[key], where)
    try:
        return cls(**checked)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: {err}") from None


def load_config(cls: type[T], path: str | Path, **overrides: Any) -> T:
    """Read a ``cls`` config from a YAML file, with keyword overrides.

    Examples
    --------
    >>> from georag.rerank.geometric.maniscope import ManiscopeConfig
    >>> load_config(ManiscopeConfig, "configs/rerank/maniscope.yaml").k  # doctest: +SKIP
    5
    """
    values = read_yaml(path)
    values.update(overrides)
    return config_from_mapping(cls, values, where=str(path))


def parse_value(cls: type, key: str, text: str) -> Any:
    """Parse the string ``text`` for field ``key`` of ``cls`` (from ``key=value`` options).

    The text is read as YAML (``3`` is an int, ``0.5`` a float, ``null`` is None, ``.inf`` or
    ``inf`` infinity) and must then fit the field's type; a string field keeps the text.
    A dotted ``key`` (``fixed.alpha``) names a field of a nested config.
    """
    types_ = _field_types(cls)
    head, dot, rest = key.partition(".")
    if dot and head in types_ and _nested(types_[head]) is not None:
        return parse_value(_nested(types_[head]), rest, text)
    if key not in types_:
        raise ValueError(f"unknown option {key!r} for {cls.__name__} (known: {sorted(types_)})")
    allowed = _allowed(types_[key])
    if text.strip().lower() in ("inf", "+inf", "-inf") and float in allowed:
        return math.copysign(math.inf, -1.0 if text.strip().startswith("-") else 1.0)
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        value = text
    if str in allowed and not isinstance(value, str) and value is not None:
        value = text
    return _check_type(cls, key, value, types_[key], f"option {key}")


def config_value(config: Any, key: str) -> Any:
    """The value of field ``key`` of ``config``; a dotted key reads a nested config's field.

    Examples
    --------
    >>> from georag.rerank.geometric.maniscope import LearnedManiscopeConfig
    >>> config_value(LearnedManiscopeConfig(), "fixed.alpha")
    0.5
    """
    for part in key.split("."):
        config = getattr(config, part)
    return config
