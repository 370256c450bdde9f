"""An option declared once, on the field of its typed config.

`option(default, help=...)` is a `dataclasses.field` whose metadata says how a person
gives the value: the flag's other spellings (fairseq's, sacreBLEU's, a short flag), its
metavar, choices and help group, and how text becomes the value. The command line
(`pipelines/cli/flags.py` builds each command's parser from the table), the workflow
YAML (read straight into the same table) and the fingerprints (the config's fields) all
come from that one declaration, the way fairseq's `gen_parser_from_dataclass` and Hugging
Face's `HfArgumentParser` do it. A config holding another config's options marks that
field `nested(...)`. Pure stdlib: the configs at every depth declare their options here.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass
from typing import Any

KEY = "nmtpipe.option"
_KINDS = {"int": int, "float": float, "str": str, "bool": bool}


@dataclass(frozen=True)
class Spec:
    help: str
    name: str | None
    aliases: tuple[str, ...]
    metavar: str | tuple[str, ...] | None
    choices: tuple[Any, ...] | None
    group: str | None
    parse: Callable[[Any], Any] | None
    repeat: bool
    invert: bool
    negatable: bool
    nargs: int | None = None


@dataclass(frozen=True)
class _Nested:
    kind: type
    group: str | None
    # field name -> its value from the command's option values: the field's default when
    # its option is not given (or always, for a field that is no option)
    defaults: Mapping[str, Callable[[Mapping[str, Any]], Any]]


def option(
    default: Any = MISSING,
    *,
    help: str,
    name: str | None = None,
    aliases: tuple[str, ...] = (),
    metavar: str | tuple[str, ...] | None = None,
    choices: tuple[Any, ...] | list[Any] | None = None,
    group: str | None = None,
    parse: Callable[[Any], Any] | None = None,
    repeat: bool = False,
    invert: bool = False,
    negatable: bool = False,
    nargs: int | None = None,
) -> Any:
    """A config field that is an option (no default: required).

    name: the flag (`--name-with-dashes`) and YAML key, when not the field's name;
    aliases: other spellings on the same option (`-s`, `--source-lang`); parse: text to
    value, raising ValueError with a message that does not name the option (default:
    by the field's type; a tuple's items comma-separated, spaces around them dropped);
    repeat: a tuple given by repeating the flag, an item each time unless `parse` makes
    more; invert: a switch that turns the (true by default) field off
    (`--keep-copies` for `drop_copies`); negatable: a switch with a `--no-` form;
    nargs: each occurrence takes that many values (`--train-pair SRC TGT`, metavar a tuple
    of their names), and `parse` makes one item of them: of their texts, or of a YAML
    item (a list of as many values, or a mapping, which `parse` may refuse with a
    ValueError); the field is a tuple of items, the flag repeatable.
    """
    spec = Spec(help, name, tuple(aliases), metavar, tuple(choices) if choices else None,
                 group, parse, repeat or nargs is not None, invert, negatable, nargs)  # fmt: skip
    return dataclasses.field(default=default, metadata={KEY: spec})


def nested(
    kind: type,
    *,
    group: str | None = None,
    defaults: Mapping[str, Callable[[Mapping[str, Any]], Any]] | None = None,
) -> Any:
    """A field holding another config (`kind()` by default) whose options are the
    command's own; `group` is the help group of those that name none, `defaults` the
    fields whose default depends on the command's other options."""
    meta = _Nested(kind, group, dict(defaults or {}))
    return dataclasses.field(default=kind(), metadata={KEY: meta})


def with_configs(
    shared: type,
    fields: Iterable[tuple[str, type, Any]],
    *,
    name: str | None = None,
    module: str | None = None,
    doc: str | None = None,
) -> type:
    """`shared` with a field per (name, config class, `nested(...)`): the options of a
    registry's kinds (vocabularies', scorers', readers') made a command's own. `module`
    is where the class is found by `name` (Beam's pickler sends it by name: by value,
    unpickling it in the same process would write the copy's fields over the class's)."""
    namespace = {"__module__": module or shared.__module__, "__doc__": doc or shared.__doc__}
    return dataclasses.make_dataclass(
        name or shared.__name__, list(fields), bases=(shared,), namespace=namespace, frozen=True
    )


def count(default: int | None, *, help: str, **more: Any) -> Any:
    """An option counting something, N: an int of at least 1."""
    return option(default, parse=positive_int, metavar="N", help=help, **more)


def comma_list(text: str) -> tuple[str, ...]:
    """`a,b,,c` → ("a", "b", "c"): items kept as written, empty ones dropped."""
    return tuple(item for item in text.split(",") if item)


def number_pair(kind: type, example: str) -> Callable[[str], tuple[Any, Any]]:
    """A parser of two numbers of `kind` given as `A,B` (brackets around them allowed,
    as fairseq writes Adam's betas `(0.9, 0.98)`); its error shows `example` and says
    integers for ints."""

    def parse(text: str) -> tuple[Any, Any]:
        try:
            first, second = (kind(x) for x in text.strip("()[] ").split(","))
        except ValueError:
            what = "integers" if kind is int else "numbers"
            raise ValueError(f"wants two {what} like {example}, not {text!r}") from None
        return first, second

    return parse


def positive_int(text: str) -> int:
    """An int of at least 1."""
    value = _number(int, text)
    if value < 1:
        raise ValueError("must be at least 1")
    return value


def non_negative_int(text: str) -> int:
    """An int of at least 0 (0 meaning none or all, as its option says)."""
    value = _number(int, text)
    if value < 0:
        raise ValueError("must be 0 or more")
    return value


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"(\d+(?:\.\d*)?)\s*([smhd]?)")


def duration(text: str) -> float:
    """Seconds of a duration like `90s`, `30m`, `6h`, `2d` or plain seconds (`5400`),
    more than zero."""
    found = _DURATION.fullmatch(text.strip().lower())
    if found is None:
        raise ValueError(f"wants a duration like 90s, 30m or 6h, not {text!r}")
    seconds = float(found.group(1)) * _UNITS[found.group(2) or "s"]
    if seconds <= 0:
        raise ValueError("must be more than zero")
    return seconds


def duration_text(seconds: float) -> str:
    """A duration in its largest whole unit (`2h`, `90m`, `45s`), as `duration` reads it."""
    for unit, size in reversed(_UNITS.items()):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size:.0f}{unit}"
    return f"{seconds:g}s"


def _number(kind: type, text: str) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"invalid {kind.__name__} value: {text!r}") from None


@dataclass(frozen=True)
class Option:
    """One row of a config's option table."""

    name: str  # the YAML key; the flag is `--name-with-dashes`
    path: tuple[str, ...]  # field names from the command's config down
    spec: Spec
    default: Any  # the field's (MISSING: required)
    kind: str  # int, float, str or bool: the value's, or each item's of a tuple
    many: bool  # a tuple
    group: str | None
    default_from: Callable[[Mapping[str, Any]], Any] | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def flags(self) -> list[str]:
        """Every spelling: short ones first, then the flag, then its long aliases."""
        short = [a for a in self.spec.aliases if not a.startswith("--")]
        long = [a for a in self.spec.aliases if a.startswith("--")]
        return [*short, self.flag, *long]

    @property
    def switch(self) -> bool:
        return self.kind == "bool" and not self.many and self.spec.parse is None

    @property
    def required(self) -> bool:
        return self.default is MISSING and self.default_from is None

    def text(self, value: Any) -> Any:
        """A value as it is written on the command line (a tuple comma-separated)."""
        if self.many and isinstance(value, tuple) and not self.spec.repeat:
            return ",".join(map(str, value))
        return value

    def parse_item(self, values: Any) -> Any:
        """One occurrence of an option of several values (`nargs`): its texts, or a YAML
        item, made one item."""
        assert self.spec.nargs is not None and self.spec.parse is not None
        if isinstance(values, list | tuple):
            if len(values) != self.spec.nargs or not all(isinstance(v, str) for v in values):
                raise ValueError(f"wants {self.spec.nargs} values, not {values!r}")
        elif not isinstance(values, dict):
            raise ValueError(f"wants a list of {self.spec.nargs} values, not {values!r}")
        return self.spec.parse(values)

    def parse(self, text: str) -> Any:
        """One command-line value; a repeated option's is a tuple of its part."""
        if self.spec.parse is not None:
            value = self.spec.parse(text)
        elif self.spec.repeat:  # one item each time
            value = self._item(text)
        elif self.many:
            value = tuple(self._item(item.strip()) for item in text.split(",") if item.strip())
        else:
            value = self._item(text)
        if self.spec.repeat and not isinstance(value, tuple):
            return (value,)
        return value

    def _item(self, text: str) -> Any:
        return text if self.kind == "str" else _number(_KINDS[self.kind], text)

    def from_value(self, value: Any) -> Any:
        """A value as YAML gives it (a number, a string, true/false, a list), checked and
        typed as its flag's would be; ValueError says what is wrong, not where."""
        if self.spec.nargs is not None:
            return self._items(value)
        if isinstance(value, dict) or value is None:
            raise ValueError(f"wants a value, not {value!r}")
        if self.switch:
            if not isinstance(value, bool):
                raise ValueError(f"wants true or false, not {value!r}")
            return value
        if isinstance(value, list):
            if self.spec.repeat:
                found = tuple(x for item in value for x in self.parse(_text(item)))
            else:
                found = self.parse(",".join(map(_text, value)))
        elif self._native(value):
            found = float(value) if self.kind == "float" else value
            found = (found,) if self.spec.repeat else found
        else:
            found = self.parse(_text(value))
        self.check_choice(found)
        return found

    def _items(self, value: Any) -> tuple[Any, ...]:
        """The items of an option of several values as YAML gives them: a list of items,
        or one item (a list of as many strings, or a mapping)."""
        one = isinstance(value, dict) or (
            isinstance(value, list)
            and len(value) == self.spec.nargs
            and all(isinstance(v, str) for v in value)
        )
        if one:
            return (self.parse_item(value),)
        if not isinstance(value, list):
            raise ValueError(f"wants a list of items, not {value!r}")
        return tuple(self.parse_item(item) for item in value)

    def _native(self, value: Any) -> bool:
        if self.many or self.spec.parse is not None or isinstance(value, bool):
            return False
        if self.kind == "float":
            return isinstance(value, int | float)
        return isinstance(value, _KINDS[self.kind])

    def check_choice(self, value: Any) -> None:
        choices = self.spec.choices
        if choices is not None and value not in choices:
            known = ", ".join(map(str, choices))
            raise ValueError(f"invalid choice: {value!r} (choose from {known})")


def _text(value: Any) -> str:
    """A YAML scalar as the command line writes it."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _kind(annotation: Any) -> tuple[str, bool]:
    """(int/float/str/bool, a tuple?) of a field's annotation (a string, with
    `from __future__ import annotations`); other names (Literal aliases) are str."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "str")
    parts = [p.strip() for p in text.split("|") if p.strip() != "None"]
    base = parts[0] if len(parts) == 1 else "str"
    if base.startswith("tuple["):
        return _kind(base[len("tuple[") :].split(",")[0].rstrip("]"))[0], True
    return (base if base in _KINDS else "str"), False


@functools.cache
def options(cls: type) -> tuple[Option, ...]:
    """The option table of config class `cls`, nested configs' options included, in
    field order. A field that several nested configs inherit from one base is one
    option, at its first place, and sets them all; two fields of one name are refused."""
    table: dict[str, Option] = {}
    for opt in _walk(cls, (), None, {}):
        first = table.setdefault(opt.name, opt)
        if first.spec is not opt.spec:
            where = ".".join(first.path), ".".join(opt.path)
            raise TypeError(f"{cls.__name__}: {where[0]} and {where[1]} are both {opt.flag}")
    return tuple(table.values())


def _walk(cls: type, path: tuple[str, ...], group: str | None, defaults: Mapping) -> list[Option]:
    found = []
    for f in dataclasses.fields(cls):
        meta = f.metadata.get(KEY)
        if isinstance(meta, _Nested):
            found += _walk(meta.kind, (*path, f.name), meta.group or group, meta.defaults)
        elif isinstance(meta, Spec):
            kind, many = _kind(f.type)
            default = f.default_factory() if f.default_factory is not MISSING else f.default
            found.append(
                Option(
                    meta.name or f.name,
                    (*path, f.name),
                    meta,
                    default,
                    kind,
                    many,
                    meta.group or group,
                    defaults.get(f.name),
                )
            )
    return found


def missing(cls: type, values: Mapping[str, Any]) -> list[Option]:
    """The required options of `cls` that `values` does not give."""
    return [o for o in options(cls) if o.required and values.get(o.name) is None]


def build(cls: type, values: Mapping[str, Any]) -> Any:
    """The config `cls` of option values by name (typed; a switch's as given, before
    `invert`); options not given take their fields' defaults. The configs' own checks
    raise as they do."""
    given = {o.name: values[o.name] for o in options(cls) if values.get(o.name) is not None}
    resolved = {o.name: o.default for o in options(cls) if o.default is not MISSING}
    return _build(cls, {**resolved, **given}, given, {})


def _build(cls: type, resolved: Mapping, given: Mapping, defaults: Mapping) -> Any:
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        meta = f.metadata.get(KEY)
        if isinstance(meta, _Nested):
            kwargs[f.name] = _build(meta.kind, resolved, given, meta.defaults)
        elif isinstance(meta, Spec) and (meta.name or f.name) in given:
            value = given[meta.name or f.name]
            kwargs[f.name] = (not value) if meta.invert else value
        elif f.name in defaults:
            kwargs[f.name] = defaults[f.name](resolved)
    return cls(**kwargs)
