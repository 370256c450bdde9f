#!/usr/bin/env python3
"""Write the manual's reference pages from the code, so that they cannot drift from it.

- docs/reference/cli/NAME.md: one page per command, from its argparse parser
  (`nmtpipe.pipelines.cli.main.build_parser`): usage, description, every option by help
  group with its default and choices, the examples;
- docs/reference/cli/index.md: the commands and their one-line summaries;
- docs/reference/config.md: the workflow config (YAML) of `nmtpipe run` and `nmtpipe
  refresh`, from each step's typed config (its `option()` fields: key, type, default,
  choices, help) and the workflow's own keys;
- README.md's results table and docs/benchmarks.md's latest figures, from
  benchmarks/RESULTS.md's "Latest figures", and docs/benchmark-history.md, which
  includes the rest of RESULTS.md (`figures.py`).

    python scripts/gen_docs.py           # rewrite the pages
    python scripts/gen_docs.py --check   # write nothing; exit 1 naming each stale page

Stdlib and nmtpipe only. The pages are the same on every machine: help is laid out for a
fixed width and no default depends on the machine it runs on.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import MISSING
from pathlib import Path
from typing import Any

# argparse lays usage out for the terminal's width: fix it before any parser exists.
WIDTH = 100
os.environ["COLUMNS"] = str(WIDTH)

from figures import (  # noqa: E402  (beside this script)
    BENCHMARKS_PAGE,
    HISTORY_PAGE,
    README,
    benchmarks_page,
    history_page,
    readme_page,
)

from nmtpipe.pipelines.beam.options import IN_PROCESS_BYTES, NmtpipeOptions  # noqa: E402
from nmtpipe.pipelines.cli.main import (  # noqa: E402
    COMMANDS,
    DESCRIPTION,
    build_parser,
    command_module,
    takes_beam,
)
from nmtpipe.pipelines.workflow.run_config import STEPS, WIRING, RefreshSettings  # noqa: E402
from nmtpipe.transforms.corpus.base import TableReader  # noqa: E402
from nmtpipe.transforms.corpus.registry import READERS  # noqa: E402
from nmtpipe.transforms.options import Option, options  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = Path("docs/reference")
CLI = REFERENCE / "cli"
CONFIG_PAGE = REFERENCE / "config.md"
READERS_PAGE = REFERENCE / "readers.md"
NOTE = "<!-- Written by scripts/gen_docs.py from {what}; do not edit: run the script. -->\n"

# The `refresh:` section's settings are a typed dataclass in the code
# (pipelines/workflow/run_config.py: RefreshSettings); what each one means is said here.
# The keys must be exactly the code's: a setting added there fails the script until it is
# described here.
REFRESH_HELP = {
    "drift_threshold": "build a new vocabulary when the share of the new parts' training "
    "tokens that the current one cannot spell passes this",
    "keep_versions": "versions kept by retention; 0 keeps all. Parts and vocabularies no "
    "kept version needs are deleted with the others",
    "checksum": "identify inputs by the sha256 of their bytes instead of their size and "
    "the store's version marker (mtime, ETag, generation)",
    "train_updates": "with `--train`: the updates added for each new version; unset, "
    "training goes up to the train section's `max_update`",
    "in_process_bytes": "local runners: new inputs of up to this many bytes in all are "
    "prepared and encoded in the refresh's own process, without worker processes, whatever "
    "mode the `beam` section names; unset, the threshold every command's local runs use "
    f"({IN_PROCESS_BYTES >> 20} MiB, `{IN_PROCESS_BYTES}`)",
}


# --- Markdown ---------------------------------------------------------------------------


def text(value: str) -> str:
    """Help text as Markdown: `code spans` kept, everything else shown as written (no
    HTML, emphasis or links made of `<unk>`, `*` or brackets; Python-Markdown leaves
    the underscores inside words alone)."""
    parts = value.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no code spans at all
        parts = [value.replace("`", "\\`")]
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(f"`{part}`")
        else:
            escaped = part.replace("<", "&lt;")
            out.append(re.sub(r"([\\*\[\]])", r"\\\1", escaped))
    return " ".join("".join(out).split())


def code(value: Any) -> str:
    """A value as an inline code span (a span holding backticks is fenced by more)."""
    shown = str(value)
    fence = "``" if "`" in shown else "`"
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def block(kind: str, body: str) -> str:
    return f"```{kind}\n{body.rstrip()}\n```\n"


# --- The command-line pages -------------------------------------------------------------


def subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser(name)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def shown_default(action: argparse.Action) -> str | None:
    """The default `--help` shows (main.HelpFormatter): none for an unset one."""
    default = action.default
    if default is None or default is False or default == [] or default is argparse.SUPPRESS:
        return None
    if isinstance(action, argparse._HelpAction | argparse._VersionAction):
        return None
    if isinstance(default, list | tuple):
        return ",".join(map(str, default))
    return str(default)


def spellings(action: argparse.Action) -> str:
    """`-s LANG`, `--src-lang LANG` for an option; `CONFIG` for a positional. Written
    here rather than by argparse, whose layout differs between Python versions."""
    choices = "{" + ",".join(map(str, action.choices)) + "}" if action.choices else None
    if not action.option_strings:
        return code(action.metavar or choices or action.dest)
    if action.nargs == 0:
        return ", ".join(code(flag) for flag in action.option_strings)
    metavar = action.metavar or choices or action.dest.upper()
    if isinstance(metavar, tuple):  # one name per value (`--train-pair SRC TGT`)
        metavar = " ".join(metavar)
    if action.nargs in ("+", "*"):
        metavar = f"{metavar} [{metavar} ...]"
    elif action.nargs == "?":
        metavar = f"[{metavar}]"
    return ", ".join(code(f"{flag} {metavar}") for flag in action.option_strings)


def help_of(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """An option's help as written, its `%(...)s` filled in as argparse fills them (its
    default is shown apart, not appended as `--help` does)."""
    if not action.help or "%(" not in action.help:
        return action.help or ""
    params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
    params["prog"] = parser.prog
    if params.get("choices") is not None:
        params["choices"] = ", ".join(map(str, params["choices"]))
    return action.help % params


def describe(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    help_text = help_of(parser, action)
    facts = []
    default = shown_default(action)
    if default is not None:
        facts.append(f"default {code(default)}")
    if isinstance(action, argparse._AppendAction):
        facts.append("repeatable")
    line = f"- {spellings(action)}"
    if facts:
        line += f" ({'; '.join(facts)})"
    return line + (f": {text(help_text)}" if help_text else "")


def epilog_sections(epilog: str | None) -> list[str]:
    """The epilog as written, its `examples:` as a shell block."""
    if not epilog:
        return []
    head, found, examples = epilog.partition("examples:\n")
    out = []
    if head.strip():
        out.append(block("text", head))
    if found:
        lines = [line[2:] if line.startswith("  ") else line for line in examples.splitlines()]
        out += ["## Examples\n", block("sh", "\n".join(lines))]
    return out


def usage(parser: argparse.ArgumentParser) -> str:
    """argparse's usage without its `usage: ` prefix, the lines it wraps dedented to match."""
    prefix = "usage: "
    lines = parser.format_usage().removeprefix(prefix).splitlines()
    return "\n".join([lines[0], *(line.removeprefix(" " * len(prefix)) for line in lines[1:])])


def command_page(name: str) -> str:
    sub = subparser(name)
    summary = COMMANDS[name][1]
    parts = [
        f"# `nmtpipe {name}`\n",
        NOTE.format(what=f"`nmtpipe {name}`'s parser"),
        f"{text(summary)}. The guide: [`nmtpipe {name}`](../../commands/{name}.md).\n",
        "## Usage\n",
        block("text", usage(sub)),
    ]
    if sub.description:
        parts.append(block("text", sub.description))
    parts.append("## Options\n")
    for group in sub._action_groups:
        actions = [a for a in group._group_actions if not isinstance(a, argparse._HelpAction)]
        if not actions:
            continue
        title = {"positional arguments": "arguments", "options": "options"}.get(
            group.title or "", group.title or "options"
        )
        parts.append(f"### {text(title)}\n")
        if group.description:
            parts.append(f"{text(group.description)}\n")
        parts.append("\n".join(describe(sub, a) for a in actions) + "\n")
    if takes_beam(name):
        parts.append(
            "### Beam pipeline options\n\n"
            f"`nmtpipe {name}` also takes Beam's own pipeline options (`--runner`,"
            " `--direct_num_workers`, Dataflow's `--project`, ...): they are checked against"
            f" Beam's parser and passed to Beam. `nmtpipe {name} --help-beam` lists them,"
            " and nmtpipe's own, given the same way:\n"
        )
        parts.append(nmtpipe_beam_options())
    parts += epilog_sections(sub.epilog)
    return "\n".join(parts)


def nmtpipe_beam_options() -> str:
    """nmtpipe's own Beam pipeline options (`NmtpipeOptions`), described as its others."""
    parser = argparse.ArgumentParser(add_help=False)
    NmtpipeOptions._add_argparse_args(parser)
    return "\n".join(describe(parser, a) for a in parser._actions) + "\n"


def cli_index() -> str:
    rows = "\n".join(
        f"| [`nmtpipe {name}`]({name}.md) | {text(summary)} |"
        for name, (_, summary) in COMMANDS.items()
    )
    return "\n".join(
        [
            "# Command-line reference\n",
            NOTE.format(what="the parsers"),
            "Every command, as its `--help` describes it; the pages under Commands explain them.\n",
            block("text", DESCRIPTION),
            "| command | what it does |\n| --- | --- |\n" + rows + "\n",
        ]
    )


# --- The workflow config page -----------------------------------------------------------


def kind_of(opt: Option) -> str:
    if opt.spec.nargs is not None:  # items of several values: `[SRC, TGT]`
        return f"list of [{', '.join(opt.spec.metavar or ())}] items"
    kind = {"str": "string", "int": "integer", "float": "number", "bool": "true/false"}
    shown = kind[opt.kind]
    return f"list of {shown}s" if opt.many else shown


def yaml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return "[" + ", ".join(yaml_value(v) for v in value) + "]"
    return str(value)


def option_line(opt: Option) -> str:
    facts = [kind_of(opt)]
    if opt.required:
        facts.append("required")
    elif opt.default_from is not None:
        facts.append("default: from the section's other options")
    elif opt.switch and opt.default is not None:
        # A switch's key is its flag: true gives the flag (which turns an inverted field off).
        shown = (not opt.default) if opt.spec.invert else opt.default
        facts.append(f"default {code(yaml_value(shown))}")
    elif opt.default is not None and opt.default is not MISSING:
        facts.append(f"default {code(yaml_value(opt.default))}")
    if opt.spec.choices:
        facts.append("one of " + ", ".join(code(yaml_value(c)) for c in opt.spec.choices))
    facts.append(f"flag {code(opt.flag)}")
    return f"- {code(opt.name)} ({'; '.join(facts)}): {text(opt.spec.help)}"


def plain_lines(step: str, plain: dict[str, type]) -> Iterable[str]:
    """A section's keys that are the command's own options, not the config's."""
    sub = subparser(step)
    for key, kind in plain.items():
        action = next(a for a in sub._actions if a.dest == key)
        facts = ["true/false" if kind is bool else "integer"]
        default = shown_default(action)
        if default is not None:
            facts.append(f"default {code(default)}")
        facts.append(f"flag {code(action.option_strings[0])}")
        yield f"- {code(key)} ({'; '.join(facts)}): {text(action.help or '')}"


def step_section(step: str) -> str:
    module = command_module(step)
    config = module.CONFIG
    wired = WIRING[step]
    rows = [option_line(o) for o in options(config) if o.name not in wired]
    rows += plain_lines(step, getattr(module, "PLAIN", {}))
    set_by = ", ".join(f"{code(k)} (`{{root}}/{v}`)" for k, v in wired.items())
    return "\n".join(
        [
            f"## `{step}`\n",
            f"The options of [`nmtpipe {step}`](cli/{step}.md), with underscores. Set by the"
            f" workflow, and refused in a config: {set_by}.\n",
            "\n".join(rows) + "\n",
        ]
    )


def refresh_section() -> str:
    types = RefreshSettings.types()
    if set(REFRESH_HELP) != set(types):
        raise SystemExit(
            "scripts/gen_docs.py: the refresh settings changed in pipelines/workflow/"
            f"run_config.py ({', '.join(sorted(types))}); describe each in REFRESH_HELP"
        )
    names = {bool: "true/false", int: "integer", float: "number"}
    defaults = dataclasses.asdict(RefreshSettings())
    rows = []
    for key, kind in types.items():
        facts = [names[kind]]
        if defaults[key] is not None:
            facts.append(f"default {code(yaml_value(defaults[key]))}")
        rows.append(f"- {code(key)} ({'; '.join(facts)}): {text(REFRESH_HELP[key])}")
    return "\n".join(
        [
            "## `refresh`\n",
            "Read by [`nmtpipe refresh`](cli/refresh.md) only; `nmtpipe run` checks it and"
            " ignores it. Numbers must not be negative.\n",
            "\n".join(rows) + "\n",
        ]
    )


TOP_LEVEL = """\
| key | type | what it is |
| --- | --- | --- |
| `root` | string, required | the storage URL every step writes under: {paths} |
| `beam` | list of strings | Beam pipeline options of the Beam steps (prepare, vocab, encode), \
as on the command line: `[--runner=DataflowRunner, --project=my-project]` |
{steps}
| `evaluate` | mapping | more test sets the decode step translates and scores after the \
test split: `NAME: {{input: PATHS, reference: PATHS}}`, into `{{root}}/decoded/NAME/`; \
`{{example}}` in a path (of any section) is the bundled example folder |
| `refresh` | mapping | the settings of `nmtpipe refresh` (below) |
| `vars` | mapping | variables for the config's paths: `NAME: VALUE` makes `{{NAME}}` in any \
string of the config VALUE (`vars: {{data: /tmp/t2t_datagen}}`, then \
`tar://dev/newsdev2017-enzh-src.en.sgm::{{data}}/dev.tgz`); `nmtpipe run --set NAME=VALUE` \
sets one, and a null VALUE must be set so |
"""


def config_page() -> str:
    paths = []  # where the steps write, in the chain's order
    for step in STEPS:
        for rel in WIRING[step].values():
            if rel.split("/")[0] not in paths:
                paths.append(rel.split("/")[0])
    steps = "\n".join(
        f"| `{s}` | mapping | the options of [`nmtpipe {s}`](cli/{s}.md) (below) |" for s in STEPS
    )
    return "\n".join(
        [
            "# Workflow config reference\n",
            NOTE.format(what="the typed configs of each step"),
            "The YAML file that [`nmtpipe run`](../commands/run.md) and"
            " [`nmtpipe refresh`](../commands/refresh.md) read. Each step's section is read"
            " straight into the typed config its command's flags come from, and checked"
            " before anything runs: an unknown key (with the nearest known one), a value of"
            " the wrong type, or a path the workflow sets is an error naming the file and"
            " the key. A list may also be written as one comma-separated string.\n",
            "## Top level\n",
            TOP_LEVEL.format(paths=", ".join(f"`{{root}}/{p}`" for p in paths), steps=steps),
            *(step_section(s) for s in STEPS),
            refresh_section(),
        ]
    )


def readers_page() -> str:
    """The corpus readers as registered: how each is given, told and spread over workers."""
    rows = []
    for reader in READERS.values():
        given = "`--table`" if isinstance(reader, TableReader) else "`--trainpref`, `--train-pair`"
        given = "`--tsv`" if reader.NAME == "tsv" else given
        suffixes = ", ".join(f"`{s}`" for s in reader.SUFFIXES) or "any"
        compressed = "yes" if reader.COMPRESSIBLE else "no"
        flags = (f"`--{f.name.replace('_', '-')}`" for f in dataclasses.fields(reader.Config))
        own = ", ".join(flags)
        rows.append(
            f"| `{reader.NAME}` | {given} | {suffixes} | {compressed} | {own or 'none'} "
            f"| {reader.SPLIT} |"
        )
    return "\n".join(
        [
            "# Corpus readers\n",
            NOTE.format(what="the corpus readers' registry (`transforms/corpus/registry.py`)"),
            "Each input `nmtpipe prepare` reads is read by one of these, chosen on the driver:"
            " a table by its suffix (before any compression suffix) or `--table-format`, a"
            " pair of files by its suffix (SGML) or as line-aligned text. How a reader is"
            " spread says which worker reads what: a reader that plans references (byte"
            " ranges, row groups, fragments) has the workers that clean the pairs read them,"
            " so no corpus text passes through the runner's shuffle; one that cannot be"
            " split is streamed by one worker, a chunk at a time. A new format is one module"
            " in `transforms/corpus/readers/` and one `register` line"
            " ([ARCHITECTURE](../architecture.md)); its own options, if it has any, are"
            " `nmtpipe prepare`'s ([prepare](cli/prepare.md)) and the workflow YAML's.\n",
            "| reader | given with | file names | compressed | its options | how it is spread |",
            "| --- | --- | --- | --- | --- | --- |",
            *rows,
        ]
    )


# --- Writing and checking ---------------------------------------------------------------


def pages(root: Path = ROOT) -> dict[Path, str]:
    """Every generated page by its path from the top of the repository."""
    found = {
        CLI / "index.md": cli_index(),
        CONFIG_PAGE: config_page(),
        READERS_PAGE: readers_page(),
        README: readme_page(root),
        BENCHMARKS_PAGE: benchmarks_page(root),
        HISTORY_PAGE: history_page(root),
    }
    for name in COMMANDS:
        found[CLI / f"{name}.md"] = command_page(name)
    return {path: content.rstrip("\n") + "\n" for path, content in found.items()}


def stale(wanted: dict[Path, str], root: Path) -> list[str]:
    """What differs on disk: a page changed or missing, or a page of a command that is gone."""
    problems = []
    for path, content in wanted.items():
        on_disk = root / path
        if not on_disk.is_file():
            problems.append(f"{path}: missing")
        elif on_disk.read_text(encoding="utf-8") != content:
            problems.append(f"{path}: stale")
    for extra in sorted((root / CLI).glob("*.md")):
        if extra.relative_to(root) not in wanted:
            problems.append(f"{extra.relative_to(root)}: no such command any more")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 naming each stale page"
    )
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository's top folder")
    args = parser.parse_args(argv)
    wanted = pages(args.root)
    if args.check:
        problems = stale(wanted, args.root)
        for problem in problems:
            print(f"{problem} (run: python scripts/gen_docs.py)", file=sys.stderr)
        return 1 if problems else 0
    for path, content in wanted.items():
        target = args.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    for extra in sorted((args.root / CLI).glob("*.md")):
        if extra.relative_to(args.root) not in wanted:
            extra.unlink()
    print(
        f"wrote {len(wanted) - 3} pages under {REFERENCE}/, {README}'s figures and the "
        "benchmark pages",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
