"""The workflow config file (YAML) → a checked `RunConfig` of typed step configs.

A config names a storage root and, per step, that step's own command-line options
(`vocab: {vocab_size: 8192, joined: true}` is `nmtpipe vocab --vocab-size 8192
--joined`); the workflow adds the paths that connect the steps. Keys are checked
against each step's parser before anything runs (an unknown key, with the nearest
known one, or a value of the wrong type is an error naming the file and the key), so a
typo never costs a half-run. This loader is the only place besides the commands that
knows their parsers.
"""

from __future__ import annotations

import argparse
import re
from importlib import resources
from typing import Any

import yaml

from nmtpipe.pipelines.cli.main import command_module
from nmtpipe.pipelines.workflow.refresh import check_settings
from nmtpipe.pipelines.workflow.run_config import (
    STEPS,
    TORCH_STEPS,
    WIRING,
    EvalSet,
    RunConfig,
    wiring,
)
from nmtpipe.transforms.errors import ConfigError, InputError, did_you_mean
from nmtpipe.transforms.storage import fsio

EXAMPLES = ("example", "tatoeba")  # the demo; the 30-minute recipe
_TOP_LEVEL = {"root", "beam", "refresh", "evaluate", *STEPS}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def example_folder() -> str:
    """The bundled example data and config; `{example}` in a config's paths."""
    return str(resources.files("nmtpipe.pipelines") / "example")


def example_config(name: str = "example") -> str:
    """A bundled config (`nmtpipe run --example [NAME]`)."""
    return f"{example_folder()}/{name}.yaml"


class _Parser(argparse.ArgumentParser):
    """A step's parser that raises instead of exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(message)


def _step_parser(step: str) -> _Parser:
    parser = _Parser(prog=f"nmtpipe {step}", add_help=False)
    command_module(step).add_arguments(parser)
    return parser


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _to_argv(step: str, options: dict[str, Any], parser: _Parser, source: str) -> list[str]:
    """The command line of `options`, checked against the step's parser."""
    actions = {a.dest: a for a in parser._actions if a.option_strings}
    argv: list[str] = []
    for key, value in options.items():
        where = f"{source}: {step}.{key}"
        if key in WIRING[step]:
            raise ConfigError(f"{where}: set by the workflow (from root), not by the config")
        action = actions.get(key)
        if action is None:
            hint = did_you_mean(key, actions)
            raise ConfigError(f"{where}: not an option of nmtpipe {step}{hint}")
        flag = action.option_strings[-1]
        if action.nargs == 0:  # a switch
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: wants true or false, not {value!r}")
            if isinstance(action, argparse.BooleanOptionalAction):  # --x / --no-x
                argv += [action.option_strings[0 if value else 1]]
            else:
                argv += [flag] if value else []
        elif isinstance(value, list) and isinstance(action, argparse._AppendAction):
            argv += [x for item in value for x in (flag, str(item))]
        elif isinstance(value, list):
            argv += [flag, ",".join(map(str, value))]
        elif isinstance(value, dict) or value is None:
            raise ConfigError(f"{where}: wants a value, not {value!r}")
        else:
            argv += [flag, str(value).lower() if isinstance(value, bool) else str(value)]
    return argv


def _step_config(step: str, options: dict[str, Any], root: str, source: str) -> tuple[Any, int]:
    """A step's typed config, wired under `root`, and its process count (torch steps)."""
    parser = _step_parser(step)
    argv = _to_argv(step, options, parser, source)
    wired = [arg for dest, url in wiring(root, step).items() for arg in (_flag(dest), url)]
    try:
        args = parser.parse_args([*argv, *wired])
        config = command_module(step).config_from_args(args)
    except ConfigError as e:
        raise ConfigError(f"{source}: {step}: {e}") from None
    return config, getattr(args, "nproc", 1) if step in TORCH_STEPS else 1


def _paths(value: Any, where: str) -> tuple[str, ...]:
    """One path or a list of them; `{example}` stands for the bundled example folder."""
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(v, str) and v for v in items):
        raise ConfigError(f"{where}: wants a path or a list of paths, not {value!r}")
    return tuple(v.replace("{example}", example_folder()) for v in items)


def _evaluation_sets(section: Any, url: str) -> tuple[EvalSet, ...]:
    """The `evaluate:` section: name → {input: PATHS, reference: PATHS}."""
    if not isinstance(section, dict):
        raise ConfigError(f"{url}: evaluate maps a test set's name to its input and reference")
    found = []
    for name, spec in section.items():
        where = f"{url}: evaluate.{name}"
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigError(f"{where}: a name of letters, digits, '.', '_' and '-'")
        if not isinstance(spec, dict) or "input" not in spec or set(spec) - {"input", "reference"}:
            raise ConfigError(f"{where}: wants input (and reference), the raw text files")
        references = _paths(spec["reference"], f"{where}.reference") if "reference" in spec else ()
        found.append(EvalSet(name, _paths(spec["input"], f"{where}.input"), references))
    return tuple(found)


def load_config(url: str) -> RunConfig:
    """Read and check a workflow config (YAML)."""
    try:
        doc = yaml.safe_load(fsio.read_bytes(url))
    except FileNotFoundError:
        raise InputError(f"{url}: no such config") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{url}: not valid YAML: {e}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{url}: a config is a mapping of root, beam and the steps")
    unknown = sorted(set(doc) - _TOP_LEVEL)
    if unknown:
        raise ConfigError(
            f"{url}: unknown key(s) {', '.join(unknown)}; known: root, beam, refresh, "
            "evaluate, steps"
        )
    root = doc.get("root")
    if not isinstance(root, str) or not root:
        raise ConfigError(f"{url}: root (the storage URL every step writes under) is required")
    beam = doc.get("beam") or []
    if not isinstance(beam, list) or not all(isinstance(x, str) for x in beam):
        raise ConfigError(f"{url}: beam is a list of Beam options like --direct_num_workers=2")
    configs, options, nproc = {}, {}, {}
    for step in STEPS:
        section = doc.get(step) or {}
        if not isinstance(section, dict):
            raise ConfigError(f"{url}: {step} is a mapping of its options")
        options[step] = section
        configs[step], processes = _step_config(step, section, root, url)
        if step in TORCH_STEPS:
            nproc[step] = processes
    return RunConfig(
        root=root,
        **configs,
        options=options,
        beam=tuple(beam),
        nproc=nproc,
        refresh=check_settings(doc.get("refresh"), url),
        evaluate=_evaluation_sets(doc.get("evaluate") or {}, url),
    )
