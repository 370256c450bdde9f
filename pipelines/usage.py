"""Usage errors: an option or a key nmtpipe does not know, named with the nearest it knows.
The command line checks its options and its YAML's keys with them, and every Beam pipeline
its Beam options (`beam/options.py`): so they sit below both rooms. Imports no Beam.
The nearest word itself is `transforms/errors.py:did_you_mean`, which the jobs use too
(a split the data does not have)."""

from __future__ import annotations

from nmtpipe.transforms.errors import ConfigError, did_you_mean


def unknown_options(unknown: list[str], known: list[str], see: str) -> ConfigError | None:
    """The error naming every unknown option in `unknown`, each with the nearest of
    `known` (or the stray arguments, when no option is unknown); None if it is empty."""
    flags = [a.split("=", 1)[0] for a in unknown if a.startswith("-")]
    if flags:
        named = ", ".join(flag + did_you_mean(flag, known) for flag in flags)
        return ConfigError(f"unknown option{'s' if len(flags) > 1 else ''} {named}; {see}")
    if unknown:
        return ConfigError(f"unexpected argument(s) {' '.join(unknown)}; {see}")
    return None
