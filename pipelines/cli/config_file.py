"""The workflow config file (YAML) → a checked `RunConfig` of typed step configs.

A config names a storage root and, per step, that step's own options (`vocab:
{vocab_size: 32000, joined: true}` is `nmtpipe vocab --vocab-size 32000 --joined`); the
workflow adds the paths that connect the steps. Each section is read straight into its
step's typed config through the config's option table, the one the command's flags
come from (`flags.from_mapping`): keys are checked before anything runs (an unknown
key, with the nearest known one, or a value of the wrong type is an error naming the
file and the key), so a typo never costs a half-run.

A path may name a variable in braces: `{example}` is the bundled example folder, and a
config may declare its own under `vars:` (`vars: {data: /tmp/t2t_datagen}`, then
`tar://dev/newsdev2017-enzh-src.en.sgm::{data}/dev.tgz`), which the command line can set
(`nmtpipe run CONFIG --set data=DIR`): a bundled recipe then reads a user's folder.
"""

from __future__ import annotations

import argparse
import re
from importlib import resources
from typing import Any

import yaml

from nmtpipe.pipelines.cli import flags
from nmtpipe.pipelines.cli.main import command_module
from nmtpipe.pipelines.workflow.run_config import (
    STEPS,
    WIRING,
    EvalSet,
    RefreshSettings,
    RunConfig,
    wiring,
)
from nmtpipe.transforms.errors import ConfigError, InputError, did_you_mean
from nmtpipe.transforms.storage import fsio

# the demo; the recipe on CPUs and on GPUs; T2T's translate_enzh inputs from their archives
EXAMPLES = ("example", "tatoeba", "tatoeba-gpu", "t2t-enzh")
# The keys a config may have, in the order a config is written.
_TOP_LEVEL = ("vars", "root", "beam", *STEPS, "evaluate", "refresh")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_VARIABLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
EXAMPLE_VARIABLE = "example"


def example_folder() -> str:
    """The bundled example data and config; `{example}` in a config's paths."""
    return str(resources.files("nmtpipe.pipelines") / "example")


def example_config(name: str = "example") -> str:
    """A bundled config (`nmtpipe run --example [NAME]`)."""
    return f"{example_folder()}/{name}.yaml"


def _step_config(
    step: str, options: dict[str, Any], root: str, source: str
) -> tuple[Any, int | None]:
    """A step's typed config, wired under `root`, and its process count (None for a
    step whose command runs no processes of its own): the section read straight into
    the config's option table (`flags.from_mapping`)."""
    for key in options:
        if key in WIRING[step]:
            raise ConfigError(
                f"{source}: {step}.{key}: set by the workflow (from root), not by the config"
            )
    module = command_module(step)
    where = f"{source}: {step}"
    own = getattr(module, "PLAIN", {})
    values, plain = flags.from_mapping(module.CONFIG, options, where, step, own)
    values.update(wiring(root, step))
    try:
        if hasattr(module, "make_config"):  # a command whose own options shape the config
            config = module.make_config(values, **plain)
        else:
            config = flags.make(module.CONFIG, values)
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None
    return config, plain.get("nproc", 1) if "nproc" in own else None


def _paths(value: Any, where: str) -> tuple[str, ...]:
    """One path or a list of them."""
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(v, str) and v for v in items):
        raise ConfigError(f"{where}: wants a path or a list of paths, not {value!r}")
    return tuple(items)


def parse_setting(text: str) -> tuple[str, str]:
    """`NAME=VALUE` (`--set data=/srv/t2t`) → (name, value); argparse's `type`."""
    name, eq, value = text.partition("=")
    if not eq or not _VARIABLE.fullmatch(f"{{{name}}}") or not value:
        raise argparse.ArgumentTypeError(
            f"wants NAME=VALUE, such as data=/srv/t2t_datagen, not {text!r}"
        )
    return name, value


def add_settings(parser: argparse.ArgumentParser) -> None:
    """`--set NAME=VALUE`, repeatable: the config's variables, for `run` and `refresh`."""
    parser.add_argument(
        "--set",
        action="append",
        type=parse_setting,
        metavar="NAME=VALUE",
        help="set a variable of the config's vars: ({NAME} in its paths)",
    )


def _variables(section: Any, settings: dict[str, str], url: str) -> dict[str, str | None]:
    """The config's variables (`vars:`, with `settings` over them) and `{example}`."""
    section = section or {}
    if not isinstance(section, dict) or not all(
        isinstance(k, str) and _VARIABLE.fullmatch(f"{{{k}}}") and (v is None or isinstance(v, str))
        for k, v in section.items()
    ):
        raise ConfigError(f"{url}: vars maps names to paths (or null: to be set with --set)")
    for name in settings:
        if name not in section:
            known = ", ".join(section) or "none"
            raise ConfigError(f"--set {name}: {url} has no variable {name} (its vars: {known})")
    return {**section, **settings, EXAMPLE_VARIABLE: example_folder()}


def _substituted(value: Any, variables: dict[str, str | None], where: str) -> Any:
    """`value` with `{NAME}` replaced in every string, for the names in `variables`
    (other braces are left as written)."""
    if isinstance(value, dict):
        return {k: _substituted(v, variables, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_substituted(v, variables, where) for v in value]
    if not isinstance(value, str):
        return value

    def fill(found: re.Match[str]) -> str:
        name = found.group(1)
        if name not in variables:
            return found.group(0)
        if variables[name] is None:
            raise ConfigError(
                f"{where}: {{{name}}} is not set: give --set {name}=VALUE, or vars.{name} "
                "in the config"
            )
        return str(variables[name])

    return _VARIABLE.sub(fill, value)


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


def load_config(url: str, settings: dict[str, str] | None = None) -> RunConfig:
    """Read and check a workflow config (YAML), its variables set (`vars:`, `settings`
    over them: `--set NAME=VALUE`)."""
    try:
        doc = yaml.safe_load(fsio.read_bytes(url))
    except FileNotFoundError:
        raise InputError(f"{url}: no such config") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{url}: not valid YAML: {e}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{url}: a config is a mapping of root, beam and the steps")
    unknown = [str(key) for key in doc if key not in _TOP_LEVEL]
    if unknown:
        named = ", ".join(key + did_you_mean(key, _TOP_LEVEL) for key in unknown)
        raise ConfigError(
            f"{url}: unknown key{'s' * (len(unknown) > 1)} {named}; a config's keys are "
            f"{', '.join(_TOP_LEVEL)}"
        )
    variables = _variables(doc.pop("vars", None), settings or {}, url)
    doc = {key: _substituted(value, variables, f"{url}: {key}") for key, value in doc.items()}
    root = doc.get("root")
    if not isinstance(root, str) or not root:
        raise ConfigError(f"{url}: root (the storage URL every step writes under) is required")
    beam = doc.get("beam") or []
    if not isinstance(beam, list) or not all(isinstance(x, str) for x in beam):
        raise ConfigError(f"{url}: beam is a list of Beam options like --direct_num_workers=2")
    configs, nproc = {}, {}
    for step in STEPS:
        section = doc.get(step) or {}
        if not isinstance(section, dict):
            raise ConfigError(f"{url}: {step} is a mapping of its options")
        configs[step], processes = _step_config(step, section, root, url)
        if processes is not None:
            nproc[step] = processes
    return RunConfig(
        root=root,
        **configs,
        beam=tuple(beam),
        nproc=nproc,
        refresh=RefreshSettings.checked(doc.get("refresh"), url),
        evaluate=_evaluation_sets(doc.get("evaluate") or {}, url),
    )
