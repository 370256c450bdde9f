"""A command's options from its typed config's fields (`transforms/options.py`): the
argparse groups, the config of parsed arguments, and the config of a workflow YAML
section, all through the same option table. Options that are no config field (--nproc,
--force, --example) stay plain argparse options of the command's module."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any

from nmtpipe.transforms.errors import ConfigError, NmtpipeError, did_you_mean
from nmtpipe.transforms.options import Option, build, missing, options


def add_options(
    parser: argparse.ArgumentParser,
    config: type,
    group: str,
    descriptions: Mapping[str, str] | None = None,
) -> dict[str, argparse._ArgumentGroup]:
    """The options of `config` in argument groups (in the order of their first option;
    `group` for the options that name none); the groups by title, for the command's
    own options."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for opt in options(config):
        title = opt.group or group
        if title not in groups:
            groups[title] = parser.add_argument_group(title, (descriptions or {}).get(title))
        _add(groups[title], opt)
    return groups


def add_rebuild_flags(group: argparse._ArgumentGroup) -> None:
    """--force and --replace, the same for every Beam step."""
    group.add_argument(
        "--force", action="store_true", help="rebuild even if --output holds this result"
    )
    group.add_argument(
        "--replace",
        action="store_true",
        help="replace a result of other inputs or options in --output (an identical one is "
        "still reused)",
    )


def add_step_options(parser: argparse.ArgumentParser, config: type, group: str) -> None:
    """A Beam step's options, all in one group, with --force and --replace."""
    add_rebuild_flags(add_options(parser, config, group)[group])


def _add(group: argparse._ArgumentGroup, opt: Option) -> None:
    spec = opt.spec
    unset = opt.default is None or opt.required or opt.default_from is not None
    kwargs: dict[str, Any] = {"dest": opt.name, "help": spec.help}
    if spec.nargs is not None:
        kwargs |= {"nargs": spec.nargs, "metavar": spec.metavar, "action": _items_action(opt)}
    elif opt.switch and spec.negatable:
        kwargs |= {
            "action": argparse.BooleanOptionalAction,
            "default": None if unset else opt.default,
        }
    elif opt.switch:
        kwargs |= {"action": "store_true"}
    else:
        kwargs |= {"type": _typed(opt), "metavar": spec.metavar, "choices": spec.choices}
        if spec.repeat:
            kwargs |= {"action": "append"}
        elif not unset:
            kwargs["default"] = opt.text(opt.default)
    group.add_argument(*opt.flags, **kwargs)


def _items_action(opt: Option) -> type[argparse.Action]:
    """argparse's action for an option of several values (`nargs`): each occurrence made
    one item (`Option.parse_item`), its message shown after the flag, items appended."""

    class Items(argparse._AppendAction):
        def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None):
            try:
                item = opt.parse_item(list(values))
            except (ValueError, NmtpipeError) as e:
                raise argparse.ArgumentError(self, _message(opt, e)) from None
            setattr(namespace, self.dest, [*(getattr(namespace, self.dest) or []), item])

    return Items


def _typed(opt: Option) -> Callable[[str], Any]:
    """argparse's `type`: the option's parse, its message shown after the flag."""

    def parse(text: str) -> Any:
        try:
            return opt.parse(text)
        except (ValueError, NmtpipeError) as e:
            raise argparse.ArgumentTypeError(_message(opt, e)) from None

    parse.__name__ = opt.kind
    return parse


def _message(opt: Option, error: Exception) -> str:
    """A parse error's message, said after the option's name (so without it)."""
    return str(error).removeprefix(f"{opt.flag} ")


def given(config: type, args: argparse.Namespace) -> dict[str, Any]:
    """The option values of parsed arguments, by option name (a repeated option's
    occurrences joined)."""
    values = {}
    for opt in options(config):
        value = getattr(args, opt.name, None)
        if opt.spec.nargs is not None and value is not None:
            value = tuple(value)
        elif opt.spec.repeat and value is not None:
            value = tuple(x for part in value for x in part)
        values[opt.name] = value
    return values


def from_args(config: type, args: argparse.Namespace) -> Any:
    """The config of a command's parsed arguments."""
    return make(config, given(config, args))


def make(config: type, values: Mapping[str, Any]) -> Any:
    """The config of option values (`given` or `from_mapping`): required options checked
    first, a config's own ValueError a ConfigError."""
    absent = [o.flag for o in missing(config, values)]
    if absent:
        names = ", ".join(absent[:-1]) + " and " * (len(absent) > 1) + absent[-1]
        raise ConfigError(f"{names} {'are' if len(absent) > 1 else 'is'} required")
    try:
        return build(config, values)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def from_mapping(
    config: type, section: Mapping[str, Any], where: str, command: str, extra: Mapping[str, type]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A YAML section's option values and its values of the command's own options
    (`extra`: name → bool or int), each key checked and typed as its flag is; errors name
    `where`.KEY."""
    table = {o.name: o for o in options(config)}
    values: dict[str, Any] = {}
    plain: dict[str, Any] = {}
    for key, value in section.items():
        at = f"{where}.{key}"
        if key in extra:
            plain[key] = _plain(extra[key], value, at)
            continue
        opt = table.get(key)
        if opt is None:
            hint = did_you_mean(str(key), [*table, *extra])
            raise ConfigError(f"{at}: not an option of nmtpipe {command}{hint}")
        try:
            values[key] = opt.from_value(value)
        except (ValueError, NmtpipeError) as e:
            raise ConfigError(f"{at}: {_message(opt, e)}") from None
    return values, plain


def _plain(kind: type, value: Any, at: str) -> Any:
    if kind is bool and not isinstance(value, bool):
        raise ConfigError(f"{at}: wants true or false, not {value!r}")
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"{at}: wants a whole number, not {value!r}")
    return value
