"""Usage errors name what was mistyped with the nearest known option or key."""

from __future__ import annotations

from nmtpipe.pipelines.usage import unknown_options
from nmtpipe.transforms.errors import did_you_mean


def test_the_nearest_known_word_or_none():
    assert did_you_mean("--runer", ["--runner", "--output"]) == " (did you mean --runner?)"
    assert did_you_mean("--zzz", ["--runner"]) == ""


def test_unknown_options_each_with_its_nearest_then_stray_arguments():
    error = unknown_options(["--outpt=x", "--vrbose"], ["--output", "--verbose"], "see --help")
    assert str(error) == (
        "unknown options --outpt (did you mean --output?), --vrbose (did you mean --verbose?);"
        " see --help"
    )
    assert str(unknown_options(["stray"], [], "see --help")) == (
        "unexpected argument(s) stray; see --help"
    )
    assert unknown_options([], ["--output"], "see --help") is None
