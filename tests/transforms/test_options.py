"""The option table of a typed config: one declaration per option, nested configs,
values from text (the command line) and from YAML."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from nmtpipe.transforms.options import (
    build,
    duration,
    duration_text,
    missing,
    nested,
    option,
    options,
    positive_int,
)


@dataclass(frozen=True)
class Inner:
    limit: int = option(8, name="inner_limit", metavar="N", help="a limit")
    drop: bool = option(True, name="keep", invert=True, help="keep them")
    kind: str = "plain"  # no option: set from the outer config's options


@dataclass(frozen=True)
class Outer:
    source: str = option(aliases=("-s", "--src"), help="required")
    rate: float = option(0.5, help="a float")
    names: tuple[str, ...] = option(("a", "b"), help="comma-separated")
    files: tuple[str, ...] = option((), name="file", repeat=True, help="repeatable")
    shards: int | None = option(None, parse=positive_int, help="at least 1")
    mode: str = option("x", choices=("x", "y"), help="a choice")
    check: bool | None = option(None, negatable=True, help="--check / --no-check")
    inner: Inner = nested(Inner, group="inner", defaults={"kind": lambda o: o["mode"] * 2})


def test_the_table_reads_the_fields():
    table = {o.name: o for o in options(Outer)}
    assert list(table) == ["source", "rate", "names", "file", "shards", "mode", "check",
                           "inner_limit", "keep"]  # fmt: skip
    assert table["source"].flags == ["-s", "--source", "--src"] and table["source"].required
    assert (table["rate"].kind, table["names"].many, table["file"].spec.repeat) == (
        "float", True, True,
    )  # fmt: skip
    assert table["inner_limit"].path == ("inner", "limit") and table["keep"].group == "inner"
    assert table["check"].switch and table["keep"].switch and not table["names"].switch
    assert [o.name for o in missing(Outer, {"rate": 1.0})] == ["source"]


def test_text_becomes_the_value_or_a_message_without_the_option():
    table = {o.name: o for o in options(Outer)}
    assert table["rate"].parse("0.25") == 0.25 and table["names"].parse("p, q,") == ("p", "q")
    assert table["file"].parse("one") == ("one",)
    with pytest.raises(ValueError, match="invalid float value: 'lots'"):
        table["rate"].parse("lots")
    with pytest.raises(ValueError, match="must be at least 1"):
        table["shards"].parse("0")
    assert table["names"].text(("a", "b")) == "a,b"  # a default as the command line shows it


def test_yaml_values_are_typed_as_their_flags_would_be():
    table = {o.name: o for o in options(Outer)}
    rate = table["rate"].from_value(1)
    assert rate == 1.0 and isinstance(rate, float)  # the same config as `--rate 1`
    assert table["names"].from_value(["c", "d"]) == ("c", "d")
    assert table["file"].from_value(["f", "g"]) == ("f", "g")
    assert table["file"].from_value("f,g") == ("f,g",)  # a repeated option: an item each time
    assert table["shards"].from_value(3) == 3 and table["source"].from_value(7) == "7"
    for name, value, message in [
        ("keep", "yes", "wants true or false, not 'yes'"),
        ("rate", None, "wants a value, not None"),
        ("rate", True, "invalid float value: 'true'"),
        ("mode", "z", "invalid choice: 'z' (choose from x, y)"),
        ("shards", 0, "must be at least 1"),
    ]:
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            table[name].from_value(value)


def test_build_fills_defaults_nested_configs_and_inverted_switches():
    config = build(Outer, {"source": "en", "keep": True, "mode": "y", "check": None})
    assert config == Outer(source="en", mode="y", inner=Inner(drop=False, kind="yy"))
    assert build(Outer, {"source": "en", "keep": False}).inner == Inner(kind="xx")


@dataclass(frozen=True)
class Sampled:
    size: int = option(4, help="shared by the configs derived from this one")


@dataclass(frozen=True)
class Left(Sampled):
    left: int = option(1, help="the left's own")


@dataclass(frozen=True)
class Right(Sampled):
    right: int = option(2, help="the right's own")


@dataclass(frozen=True)
class Both:
    left: Left = nested(Left, group="left")
    right: Right = nested(Right, group="right")


def test_a_field_nested_configs_inherit_is_one_option_that_sets_each():
    assert [(o.name, o.group) for o in options(Both)] == [
        ("size", "left"), ("left", "left"), ("right", "right"),
    ]  # fmt: skip
    assert build(Both, {"size": 9}) == Both(Left(size=9), Right(size=9))


def test_two_options_of_one_name_are_refused():
    @dataclass(frozen=True)
    class Clash:
        size: int = option(3, help="not the nested one's")
        left: Left = nested(Left)

    with pytest.raises(TypeError, match=r"^Clash: size and left.size are both --size$"):
        options(Clash)


@pytest.mark.parametrize(
    ("text", "seconds", "shown"),
    [("90s", 90, "90s"), ("30m", 1800, "30m"), ("6h", 21600, "6h"), ("2d", 172800, "2d"),
     ("5400", 5400, "90m"), (" 1.5H ", 5400, "90m"), ("0.5", 0.5, "0.5s"),
     ("43200.0", 43200, "12h")],
)  # fmt: skip
def test_a_duration_is_seconds_shown_in_their_largest_whole_unit(text, seconds, shown):
    assert duration(text) == seconds
    assert duration_text(duration(text)) == shown


@pytest.mark.parametrize(
    ("text", "said"),
    [("soon", "wants a duration like 90s, 30m or 6h, not 'soon'"),
     ("6 hours", "wants a duration like 90s, 30m or 6h, not '6 hours'"),
     ("-1h", "wants a duration like 90s, 30m or 6h, not '-1h'"),
     ("0m", "must be more than zero")],
)  # fmt: skip
def test_a_duration_that_is_none_says_why(text, said):
    with pytest.raises(ValueError) as bad:
        duration(text)
    assert str(bad.value) == said
