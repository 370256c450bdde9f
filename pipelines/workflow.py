"""`nmtpipe run CONFIG`: the whole chain from one YAML file, every step cached.

A config names a storage root and, per step, that step's own command-line options
(`vocab: {vocab_size: 8192, joined: true}` is `nmtpipe vocab --vocab-size 8192
--joined`); the workflow adds the paths that connect the steps:

    {root}/prepared → {root}/vocab → {root}/encoded → {root}/checkpoints → {root}/decoded

`beam:` holds Beam pipeline options for the Beam steps. Keys are checked against each
step's parser before anything runs (an unknown key, with the nearest known one, or a
value of the wrong type is an error naming the key), so a typo never costs a half-run.

prepare, vocab and encode are content-addressed by their own manifests and report
`cached` when their output already holds the result. train and decode are addressed
here: a step's fingerprint covers its options and its input's fingerprint, and is
recorded in `{root}/workflow/{step}.json` once the step has finished, so finished
steps are skipped and a changed option (or a changed input upstream) runs them again
(train then resumes from its last checkpoint).
"""

from __future__ import annotations

import argparse
import difflib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module, resources
from typing import Any

import yaml

from transforms import encoded_dataset, manifest, records, storage, vocabulary
from transforms.errors import ConfigError, InputError

STEPS = ("prepare", "vocab", "encode", "train", "decode")
# What each step reads and writes under the root: set by the workflow, never by a config.
_WIRING: dict[str, dict[str, str]] = {
    "prepare": {"output": "prepared"},
    "vocab": {"prepared": "prepared", "output": "vocab"},
    "encode": {"prepared": "prepared", "vocab": "vocab", "output": "encoded"},
    "train": {"data": "encoded", "save_dir": "checkpoints"},
    "decode": {"checkpoint": "checkpoints/checkpoint_best.pt", "output": "decoded"},
}
_BEST, _LAST = "checkpoints/checkpoint_best.pt", "checkpoints/checkpoint_last.pt"
_BEAM_STEPS = ("prepare", "vocab", "encode")
_KINDS = {"prepare": records.KIND, "vocab": vocabulary.KIND, "encode": encoded_dataset.KIND}
_TOP_LEVEL = {"root", "beam", "refresh", *STEPS}
EXAMPLE = "example.yaml"


@dataclass(frozen=True)
class RunConfig:
    """A checked workflow config: the root and each step's command line."""

    root: str
    argv: dict[str, list[str]]  # per step, its options (without the wiring)
    options: dict[str, dict[str, Any]] = field(default_factory=dict)  # as written
    beam: tuple[str, ...] = ()  # Beam pipeline options of the Beam steps
    refresh: dict[str, Any] = field(default_factory=dict)  # `nmtpipe refresh`'s settings

    def step_argv(self, step: str) -> list[str]:
        wiring = [
            arg for dest, rel in _WIRING[step].items() for arg in (_flag(dest), self._wired(rel))
        ]
        # A Beam step's output is rebuilt in place when the config changes.
        rebuild = ["--replace", *self.beam] if step in _BEAM_STEPS else []
        return [step, *wiring, *self.argv[step], *rebuild]

    def step_args(self, step: str, **wiring: str) -> argparse.Namespace:
        """A step's parsed options from the config, with the given paths (`output=...`)."""
        argv = [arg for dest, url in wiring.items() for arg in (_flag(dest), url)]
        return _step_parser(step).parse_args([*self.argv[step], *argv])

    def _wired(self, rel: str) -> str:
        """A path under the root; decode takes the best checkpoint, or the last one when
        training ended before any validation chose a best."""
        url = self.url(rel)
        if rel == _BEST and not storage.exists(url):
            return self.url(_LAST)
        return url

    def url(self, rel: str) -> str:
        return storage.join(self.root, rel)


def example_config() -> str:
    return str(resources.files("pipelines") / "example" / EXAMPLE)


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


class _Parser(argparse.ArgumentParser):
    """A step's parser that raises instead of exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(message)


def _step_parser(step: str) -> _Parser:
    from pipelines.cli import COMMANDS

    parser = _Parser(prog=f"nmtpipe {step}", add_help=False)
    import_module(COMMANDS[step]).add_arguments(parser)
    return parser


def _to_argv(step: str, options: dict[str, Any], parser: _Parser, source: str) -> list[str]:
    """The command line of `options`, checked against the step's parser."""
    actions = {a.dest: a for a in parser._actions if a.option_strings}
    argv: list[str] = []
    for key, value in options.items():
        where = f"{source}: {step}.{key}"
        if key in _WIRING[step]:
            raise ConfigError(f"{where}: set by the workflow (from root), not by the config")
        action = actions.get(key)
        if action is None:
            near = difflib.get_close_matches(key, list(actions), n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise ConfigError(f"{where}: not an option of nmtpipe {step}{hint}")
        flag = action.option_strings[-1]
        if action.nargs == 0:  # a switch
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: wants true or false, not {value!r}")
            argv += [flag] if value else []
        elif isinstance(value, list) and isinstance(action, argparse._AppendAction):
            argv += [x for item in value for x in (flag, str(item))]
        elif isinstance(value, list):
            argv += [flag, ",".join(map(str, value))]
        elif isinstance(value, dict) or value is None:
            raise ConfigError(f"{where}: wants a value, not {value!r}")
        else:
            argv += [flag, str(value).lower() if isinstance(value, bool) else str(value)]
    try:
        parser.parse_args(argv)
    except ConfigError as e:
        raise ConfigError(f"{source}: {step}: {e}") from None
    return argv


def load_config(url: str) -> RunConfig:
    """Read and check a workflow config (YAML)."""
    try:
        doc = yaml.safe_load(storage.read_bytes(url))
    except FileNotFoundError:
        raise InputError(f"{url}: no such config") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{url}: not valid YAML: {e}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{url}: a config is a mapping of root, beam and the steps")
    unknown = sorted(set(doc) - _TOP_LEVEL)
    if unknown:
        raise ConfigError(
            f"{url}: unknown key(s) {', '.join(unknown)}; known: root, beam, refresh, steps"
        )
    if not isinstance(doc.get("root"), str) or not doc["root"]:
        raise ConfigError(f"{url}: root (the storage URL every step writes under) is required")
    beam = doc.get("beam") or []
    if not isinstance(beam, list) or not all(isinstance(x, str) for x in beam):
        raise ConfigError(f"{url}: beam is a list of Beam options like --direct_num_workers=2")
    argv, options = {}, {}
    for step in STEPS:
        section = doc.get(step) or {}
        if not isinstance(section, dict):
            raise ConfigError(f"{url}: {step} is a mapping of its options")
        options[step] = section
        argv[step] = _to_argv(step, section, _step_parser(step), url)
    return RunConfig(doc["root"], argv, options, tuple(beam), _refresh_settings(doc, url))


def _refresh_settings(doc: dict[str, Any], url: str) -> dict[str, Any]:
    from pipelines.refresh import check_settings

    return check_settings(doc.get("refresh"), url)


# --- running --------------------------------------------------------------------------


@dataclass
class StepResult:
    step: str
    status: str  # ran, cached, failed, skipped (outside --from/--until)
    seconds: float = 0.0
    figures: str = ""


def _committed(config: RunConfig, step: str) -> dict[str, Any] | None:
    """The manifest of a Beam step's output under the root, if committed."""
    url = storage.canonical_url(config.url(_WIRING[step]["output"]))
    return manifest.read_manifest(url, _KINDS[step])


def _identity(config: RunConfig, step: str) -> tuple[str, dict[str, Any]] | None:
    """A committed output's fingerprint and its manifest file's version (a rebuild
    writes a new manifest even when the fingerprint is the same)."""
    doc = _committed(config, step)
    if doc is None:
        return None
    url = manifest.manifest_url(storage.canonical_url(config.url(_WIRING[step]["output"])))
    return doc["fingerprint"], storage.file_identity(url)


def _record_url(config: RunConfig, step: str) -> str:
    return config.url(f"workflow/{step}.json")


def _upstream_fingerprint(config: RunConfig, step: str) -> str:
    """What a torch step's result depends on besides its own options."""
    if step == "train":
        ident = _identity(config, "encode")
        if ident is None:
            raise InputError(f"{config.url('encoded')} holds no encode output; run encode first")
        return ident[0]
    record = _read_record(config, "train")
    if record is None:
        raise InputError("train has not finished under this root; run it first")
    return record["fingerprint"]


def _read_record(config: RunConfig, step: str) -> dict[str, Any] | None:
    url = _record_url(config, step)
    return json.loads(storage.read_bytes(url)) if storage.exists(url) else None


def _figures(config: RunConfig, step: str) -> str:
    """The key figures of a step's committed output."""
    if step in _BEAM_STEPS:
        doc = _committed(config, step)
        if doc is None:
            return ""
        if step == "vocab":
            sizes = {side: v.get("vocab_size") for side, v in doc["vocabularies"].items()}
            return f"{doc['model']} " + ", ".join(f"{s} {n:,}" for s, n in sizes.items() if n)
        return ", ".join(f"{split} {info['pairs']:,}" for split, info in doc["splits"].items())
    if step == "train":
        summary = json.loads(storage.read_bytes(config.url("checkpoints/train_summary.json")))
        return f"{summary['updates']} updates, valid loss {summary['valid_loss']:.3f}"
    scores = json.loads(storage.read_bytes(config.url("decoded/scores.json")))
    found = [f"{name} {scores[name]}" for name in ("bleu", "chrf") if name in scores]
    return ", ".join([f"{scores['sentences']:,} sentences", *found])


def run_workflow(
    config: RunConfig,
    first: str = "prepare",
    last: str = "decode",
    run_step: Callable[[list[str]], int] | None = None,
    log: Callable[[str], None] = print,
) -> list[StepResult]:
    """Run the steps from `first` to `last`; stop at the first that fails."""
    from pipelines.cli import main

    run_step = run_step or main
    chosen = STEPS[STEPS.index(first) : STEPS.index(last) + 1]
    results = []
    for step in STEPS:
        if step not in chosen:
            results.append(StepResult(step, "skipped"))
            continue
        log(f"== {step}")
        started = time.perf_counter()
        status = _run_one(config, step, run_step)
        result = StepResult(step, status, time.perf_counter() - started)
        if status == "failed":
            results.append(result)
            break
        result.figures = _figures(config, step)
        results.append(result)
    return results


def _run_one(config: RunConfig, step: str, run_step: Callable[[list[str]], int]) -> str:
    argv = config.step_argv(step)
    if step in _BEAM_STEPS:
        before = _identity(config, step)
        if run_step(argv) != 0:
            return "failed"
        after = _identity(config, step)
        return "cached" if before is not None and before == after else "ran"
    fingerprint = manifest.fingerprint(
        {
            "step": step,
            "options": config.options[step],
            "input": _upstream_fingerprint(config, step),
        }
    )
    record = _read_record(config, step)
    if record is not None and record["fingerprint"] == fingerprint:
        return "cached"
    if record is not None:
        storage.remove(_record_url(config, step))
    if run_step(argv) != 0:
        return "failed"
    storage.write_bytes(
        _record_url(config, step), json.dumps({"fingerprint": fingerprint}).encode()
    )
    return "ran"


def summary_table(results: list[StepResult]) -> str:
    rows = [("step", "status", "time", "result")]
    rows += [
        (r.step, r.status, f"{r.seconds:.1f} s" if r.seconds else "", r.figures) for r in results
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)) + "  " + row[3]
        for row in rows
    ).rstrip()
