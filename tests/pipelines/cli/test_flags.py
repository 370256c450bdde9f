"""Each command's options come from its typed config: the parser, the config of parsed
arguments and of a YAML section all read the one declaration."""

from __future__ import annotations

import argparse

import pytest

from nmtpipe.pipelines.cli import flags
from nmtpipe.pipelines.cli.main import COMMANDS, command_module
from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.options import options
from tests.transforms.test_options import Inner, Outer

CONFIGURED = [name for name in COMMANDS if hasattr(command_module(name), "CONFIG")]


def _parser(config: type) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    flags.add_options(parser, config, "main")
    return parser


def test_a_parser_from_a_config():
    parser = _parser(Outer)
    titles = [g.title for g in parser._action_groups]
    assert titles[-2:] == ["main", "inner"]
    args = parser.parse_args(
        ["--src", "en", "--file", "a,b", "--file", "c", "--keep", "--no-check"]
    )
    config = flags.make(Outer, flags.given(Outer, args))
    assert config.files == ("a,b", "c") and config.inner.drop is False
    assert config.check is False and config.names == ("a", "b") and config.inner.kind == "xx"
    with pytest.raises(ConfigError, match=r"^--source is required$"):
        flags.make(Outer, flags.given(Outer, parser.parse_args([])))


def test_a_yaml_section_names_the_key_it_refuses():
    values, plain = flags.from_mapping(
        Outer, {"source": "en", "n": 2}, "f.yaml: s", "s", {"n": int}
    )
    assert flags.make(Outer, values) == Outer(source="en", inner=Inner(kind="xx"))
    assert plain == {"n": 2}
    with pytest.raises(ConfigError, match=r"^f.yaml: s.rat: not an option of nmtpipe s \(did"):
        flags.from_mapping(Outer, {"rat": 1}, "f.yaml: s", "s", {})
    with pytest.raises(ConfigError, match=r"^f.yaml: s.n: wants a whole number, not 'x'$"):
        flags.from_mapping(Outer, {"n": "x"}, "f.yaml: s", "s", {"n": int})


def test_an_option_of_two_values_a_time():
    """`--train-pair SRC TGT`: two values each time, repeatable; a YAML item is a list of
    two or a mapping; its help and errors name the values."""
    from nmtpipe.pipelines.workflow.prepare_plan import FilePair, PrepareConfig

    parser = argparse.ArgumentParser(allow_abbrev=False)
    flags.add_options(parser, PrepareConfig, "input")
    assert "--train-pair SRC TGT" in parser.format_help()
    argv = ["-s", "en", "-t", "zh", "--output", "o", "--train-pair", "a.en", "a.zh"]
    args = parser.parse_args([*argv, "--train-pair", "b_en.txt", "b_cn.txt"])
    config = flags.make(PrepareConfig, flags.given(PrepareConfig, args))
    assert config.train_pair == (FilePair("a.en", "a.zh"), FilePair("b_en.txt", "b_cn.txt"))
    yaml_section = {
        "src_lang": "en",
        "tgt_lang": "zh",
        "train_pair": [["a.en", "a.zh"], {"src": "c.en", "tgt": "c.zh", "tgt_encoding": "GBK"}],
        "valid_pair": ["d.en.sgm", "d.zh.sgm"],  # one pair
    }
    values, _ = flags.from_mapping(PrepareConfig, yaml_section, "f.yaml: prepare", "prepare", {})
    config = flags.make(PrepareConfig, {**values, "output": "o"})
    assert config.train_pair[1] == FilePair("c.en", "c.zh", None, "GBK")
    assert config.valid_pair == (FilePair("d.en.sgm", "d.zh.sgm"),)
    for bad, message in (
        ({"train_pair": [["a", "b", "c"]]}, r"train_pair: wants 2 values, not \['a', 'b', 'c'\]"),
        ({"train_pair": [{"src": "a"}]}, r"train_pair: a pair is \[SRC, TGT\] or a mapping"),
        ({"train_pair": [{"src": "a", "tgt": "b", "tgt_encoding": "x-nope"}]},
         r"train_pair: unknown encoding 'x-nope'"),
        ({"train_pair": "a"}, r"train_pair: wants a list of items, not 'a'"),
    ):  # fmt: skip
        with pytest.raises(ConfigError, match=r"^f\.yaml: prepare\." + message):
            flags.from_mapping(PrepareConfig, bad, "f.yaml: prepare", "prepare", {})
    with pytest.raises(SystemExit):
        parser.parse_args([*argv[:-1]])  # one value: argparse says so


# What a command needs besides its required options for its config to be valid.
NEEDS = {"prepare": {"trainpref": "t"}, "translate": {"checkpoint": "c"}}


@pytest.mark.parametrize("command", CONFIGURED)
def test_every_command_option_is_its_config_field(command):
    """A command's config options are flags with the fields' defaults: parsing only the
    required options gives the config of only those."""
    module = command_module(command)
    table = options(module.CONFIG)
    parser = argparse.ArgumentParser(allow_abbrev=False)
    module.add_arguments(parser)
    assert {o.name for o in table} <= {a.dest for a in parser._actions}
    values = {o.name: f"x{i}" for i, o in enumerate(table) if o.required}
    values |= NEEDS.get(command, {})
    argv = [
        word for name, value in values.items() for word in ("--" + name.replace("_", "-"), value)
    ]
    args = parser.parse_args(argv)
    own = getattr(module, "config_from_args", None)  # prepare's, for --example
    config = own(args) if own else flags.from_args(module.CONFIG, args)
    fields = {**values, **({"trainpref": ("t",)} if command == "prepare" else {})}
    assert config == module.CONFIG(**fields)


@pytest.mark.parametrize("command", CONFIGURED)
def test_a_decimal_says_what_it_is(command):
    """N is a whole number: a decimal's metavar names it (`--lr LR`, `--valid-fraction F`)."""
    for opt in options(command_module(command).CONFIG):
        if opt.kind == "float":
            assert opt.spec.metavar not in (None, "N"), opt.flag
