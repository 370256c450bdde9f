"""The manual against the code: every `nmtpipe` command line in README.md and docs/ is
parsed by the real parsers (the command and every flag it names must exist; Beam's
options through Beam's own parser), without running it; every YAML example loads as a
workflow config; the generated reference pages are current; the README keeps its
install commands and its length.

A command line is one in a shell code block (```sh, ```bash, ```shell, ```console), its
`\\` continuations joined: `nmtpipe ...`, `.venv/bin/nmtpipe ...`, `python -m nmtpipe
...` or `torchrun ... -m nmtpipe ...`, alone or within `&&`, `;` and `|`. A line this
test cannot read fails, naming its file and line: nothing is skipped silently.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from nmtpipe.pipelines.beam.options import check_beam_args
from nmtpipe.pipelines.cli.main import COMMANDS, build_parser, takes_beam
from nmtpipe.transforms.errors import NmtpipeError

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").rglob("*.md"))
PAGES = [README, *DOCS]
SHELL = {"sh", "bash", "shell", "console"}
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)\s*(?P<info>[^\s`]*)")
SNIPPET = re.compile(r'^--8<-- "(?P<path>[^"]+)"$')
# The README's two install commands, byte for byte: the project's contract with its users
# and with CI (.ci/run runs the second's tests).
INSTALL = (
    "```sh\n"
    "python3 -m venv .venv && .venv/bin/pip install torch==2.13.0 -e . && .venv/bin/nmtpipe run --example\n"  # noqa: E501
    "```\n"
    "\n"
    "```sh\n"
    "python3 -m venv .venv && .venv/bin/pip install torch==2.13.0 -e '.[dev]' && .venv/bin/python -m pytest\n"  # noqa: E501
    "```\n"
)
# What the docs write in place of a value, and what stands for it when parsing.
SUBSTITUTIONS = {
    "$(scripts/local-cluster options flink)": "--runner=PortableRunner "
    "--job_endpoint=localhost:8099 --environment_type=LOOPBACK --parallelism=2",
    "$(scripts/local-cluster options spark)": "--runner=PortableRunner "
    "--job_endpoint=localhost:8099 --environment_type=LOOPBACK",
}
PLACEHOLDER = re.compile(r"<[A-Za-z][\w .-]*>")  # <corpus>, <bucket>
OPERATORS = {"&&", "||", ";", "|", "&"}
REDIRECTS = {"<", ">", ">>", ">&", "<&", "&>", ">|"}
PYTHON = re.compile(r"^python(3(\.\d+)?)?$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the block's first content line
    info: str
    lines: tuple[str, ...]

    def where(self, offset: int = 0) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line + offset}"


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page."""
    found, lines = [], page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, start = match["fence"], i + 1
        end = start
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        body = tuple(line[len(match["indent"]) :] for line in lines[start:end])
        found.append(Block(page, start + 1, match["info"], body))
        i = end + 1
    return found


def command_lines(block: Block) -> list[tuple[str, str]]:
    """(file:line, text) of each logical line of a shell block, continuations joined."""
    out, current, first = [], "", None
    for offset, raw in enumerate(block.lines):
        line = raw.rstrip()
        if first is None:
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            first = offset
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        out.append((block.where(first), current + line))
        current, first = "", None
    if first is not None:
        out.append((block.where(first), current))
    return out


def simple_commands(text: str) -> list[list[str]]:
    """A shell line's simple commands as words, its operators and redirections dropped."""
    for written, value in SUBSTITUTIONS.items():
        text = text.replace(written, value)
    if "$(" in text or "`" in text:
        raise ValueError("a command substitution this test does not know")
    text = PLACEHOLDER.sub("x", text)  # before '<' and '>' are read as redirections
    text = re.sub(r"(?<=\s)\d+(?=[<>])", "", text)  # 2>&1: the descriptor goes with '>'
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words, commands, skip = list(lexer), [[]], False
    for word in words:
        if skip:
            skip = False
        elif word in REDIRECTS:
            skip = True
        elif word in OPERATORS:
            commands.append([])
        else:
            commands[-1].append(word)
    return [c for c in commands if c]


def nmtpipe_args(words: list[str]) -> tuple[list[str] | None, list[str]]:
    """The arguments given to nmtpipe, and torchrun's own, or (None, []) for a command
    that does not run nmtpipe. ValueError for one that names nmtpipe in a way this test
    cannot read."""
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):  # VAR=value
        words = words[1:]
    if not words:
        return None, []
    program = words[0].rsplit("/", 1)[-1]
    if program == "nmtpipe":
        return words[1:], []
    if PYTHON.match(program) and words[1:3] == ["-m", "nmtpipe"]:
        return words[3:], []
    if program == "torchrun" and "nmtpipe" in words:
        at = words.index("nmtpipe")
        if words[at - 1] not in ("-m", "--module"):
            raise ValueError("torchrun runs nmtpipe as a module: torchrun ... -m nmtpipe STEP")
        return words[at + 1 :], words[1 : at - 1]
    if any(w == "nmtpipe" or w.endswith("/nmtpipe") for w in words):
        raise ValueError(f"nmtpipe is run in a way this test cannot read: {' '.join(words)}")
    return None, []


def parse(args: list[str]) -> str | None:
    """Parse nmtpipe's arguments as `nmtpipe` does (pipelines/cli/main.py), without
    running the step; what is wrong, or None."""
    if not args or args[0] == "...":
        return "no command"
    command = args[0]
    if command.startswith("-"):  # nmtpipe --help, --version
        return _parse(build_parser(), args)[0]
    if command not in COMMANDS:
        return f"no such command: {command}"
    parser = build_parser(command)
    # `...` is an elided value after an option that takes one, else "more options".
    taking = {
        flag
        for action in _command_parser(parser, command)._actions
        if action.nargs != 0
        for flag in action.option_strings
    }
    args = [
        "x" if a == "..." and i and args[i - 1] in taking else a
        for i, a in enumerate(args)
        if a != "..." or (i and args[i - 1] in taking)
    ]
    problem, rest = _parse(parser, args)
    if problem is not None:
        return problem
    if not takes_beam(command):
        return f"unknown argument(s): {' '.join(rest)}" if rest else None
    ours = [flag for action in _command_parser(parser, command)._actions
            for flag in action.option_strings]  # fmt: skip
    try:
        check_beam_args(rest, ours)  # Beam's options pass, anything else is refused
    except NmtpipeError as e:
        return str(e)
    return None


def _command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


def _parse(parser: argparse.ArgumentParser, args: list[str]) -> tuple[str | None, list[str]]:
    """argparse's error, and the arguments it left over."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            _, rest = parser.parse_known_args(args)
        except SystemExit as e:  # --help exits 0 after printing
            lines = err.getvalue().strip().splitlines()
            return (lines[-1] if lines else f"exit {e.code}") if e.code else None, []
    return None, rest


def check_torchrun(args: list[str]) -> str | None:
    """torchrun's own options, checked by torchrun's parser."""
    from torch.distributed.run import get_args_parser

    _, unknown = get_args_parser().parse_known_args([*args, "-m", "nmtpipe"])
    return f"not torchrun options: {' '.join(unknown)}" if unknown else None


def problems_of(page: Path) -> tuple[list[str], int]:
    """What is wrong with the page's command lines, and how many were checked."""
    problems, checked = [], 0
    for block in blocks(page):
        if not block.info:
            problems.append(f"{block.where()}: a code block without a language")
            continue
        if block.info not in SHELL:
            continue
        for where, line in command_lines(block):
            try:
                commands = simple_commands(line)
                for words in commands:
                    args, torchrun = nmtpipe_args(words)
                    if args is None:
                        continue
                    checked += 1
                    problem = parse(args) or (check_torchrun(torchrun) if torchrun else None)
                    if problem:
                        problems.append(f"{where}: {line.strip()}\n    {problem}")
            except ValueError as e:
                problems.append(f"{where}: cannot read this line: {e}\n    {line.strip()}")
    return problems, checked


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_line_parses(page):
    problems, _ = problems_of(page)
    assert not problems, "\n".join(problems)


def test_the_manual_has_command_lines_to_check():
    # The extraction itself: if it found nothing, the test above would pass vacuously.
    assert problems_of(ROOT / "docs/recipes/demo.md")[1] >= 7
    assert problems_of(ROOT / "docs/guides/scale.md")[1] >= 5  # torchrun and Beam forms


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("nmtpipe prepare --exmaple --output x", "--exmaple"),
        ("nmtpipe prepare --example --output x --runer=DataflowRunner", "--runer"),
        ("nmtpipe train --data x --runner=DataflowRunner", "--runner"),
        ("nmtpipe trian --data x", "no such command"),
        (".venv/bin/nmtpipe decode --beam four", "invalid"),
        ("torchrun --nnodes 2 --bogus 1 -m nmtpipe train --data x", "--bogus"),
    ],
)
def test_a_wrong_line_fails(line, problem):
    found = []
    for words in simple_commands(line):
        args, torchrun = nmtpipe_args(words)
        found.append(parse(args) or (check_torchrun(torchrun) if torchrun else None) or "")
    assert problem in " ".join(found)


@pytest.mark.parametrize(
    "line",
    [
        "nmtpipe prepare --example --output runs/p $(scripts/local-cluster options flink)",
        "python -m nmtpipe vocab --prepared runs/p --output runs/v --runner=FnApiRunner",
        "echo 'How are you?' | .venv/bin/nmtpipe translate --checkpoint ck.pt > out.txt 2>&1",
        "0 3 * * * cd /srv && .venv/bin/nmtpipe refresh corpus.yaml --train >> log 2>&1",
        "nmtpipe report <output> ...",
    ],
)
def test_the_forms_the_docs_use_parse(line):
    commands = [nmtpipe_args(words) for words in simple_commands(line)]
    runs = [args for args, _ in commands if args is not None]
    assert len(runs) == 1 and parse(runs[0]) is None


def test_a_line_naming_nmtpipe_otherwise_fails():
    with pytest.raises(ValueError, match="cannot read"):
        nmtpipe_args(["sudo", "nmtpipe", "run"])
    with pytest.raises(ValueError, match="command substitution"):
        simple_commands("nmtpipe prepare $(other-tool) --output x")


def yaml_examples() -> list:
    """(where, text) of every YAML block of the pages, their snippets resolved, and of
    every bundled config."""
    found = []
    for page in PAGES:
        for block in blocks(page):
            if block.info not in ("yaml", "yml"):
                continue
            body = []
            for line in block.lines:
                match = SNIPPET.match(line.strip())
                body.append((ROOT / match["path"]).read_text() if match else line)
            found.append(pytest.param(block.where(), "\n".join(body), id=block.where()))
    for config in sorted((ROOT / "pipelines/example").glob("*.yaml")):
        where = str(config.relative_to(ROOT))
        found.append(pytest.param(where, config.read_text(), id=where))
    return found


@pytest.mark.parametrize(("where", "text"), yaml_examples())
def test_every_yaml_example_loads_as_a_workflow_config(where, text, tmp_path):
    from nmtpipe.pipelines.cli.config_file import load_config

    config = tmp_path / "config.yaml"
    config.write_text(text, encoding="utf-8")
    try:
        load_config(str(config))
    except NmtpipeError as e:
        pytest.fail(f"{where}: {e}", pytrace=False)


def test_the_reference_pages_are_current():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts/gen_docs.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_the_readme_keeps_its_install_commands_and_its_length():
    text = README.read_text(encoding="utf-8")
    assert INSTALL in text
    assert len(text.splitlines()) <= 220


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_the_readme_links_resolve():
    # The manual's own links are checked by `mkdocs build --strict` (CI); the README is
    # read on GitHub, whose anchors this reproduces.
    text = README.read_text(encoding="utf-8")
    problems = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        file = ROOT / path if path else README
        if not file.exists():
            problems.append(f"{target}: no such file")
        elif anchor:
            headings = re.findall(r"^#+ (.+)$", file.read_text(encoding="utf-8"), re.M)
            if anchor not in {github_anchor(h) for h in headings}:
                problems.append(f"{target}: no such heading")
    assert not problems, "\n".join(problems)


def inline_flags(page: Path) -> list[tuple[str, str | None, str]]:
    """(flag, the command it belongs to or None for any, the code span) of each `--flag`
    the page's prose names in a code span. A span that starts with another program
    (torchrun, spm_train, fairseq-preprocess) or is a line of output is not nmtpipe's."""
    text = re.sub(r"^ *```.*?^ *```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    found = []
    for span in re.findall(r"`([^`]+)`", text):
        words = span.split()
        if words[0] == "nmtpipe" and len(words) > 1:
            words = words[1:]
        if words[0] in COMMANDS:
            command = words[0]
        elif words[0].startswith("--"):
            command = None
        else:
            continue
        for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9_-]*)", span):
            found.append((flag, command, span))
    return found


def test_every_flag_named_in_the_prose_exists():
    # A flag named in a sentence belongs to the command the span names, or, bare, to any
    # command (pages refer to each other's flags), to Beam or to torchrun.
    from nmtpipe.pipelines.beam.options import beam_flags

    def flags_of(command: str) -> set[str]:
        parser = build_parser(command)
        return {f for a in _command_parser(parser, command)._actions for f in a.option_strings}

    from torch.distributed.run import get_args_parser

    by_command = {command: flags_of(command) for command in COMMANDS}
    torchrun = {f for a in get_args_parser()._actions for f in a.option_strings}
    anywhere = set(beam_flags()).union(torchrun, *by_command.values())
    problems = []
    for page in PAGES:
        for flag, command, span in inline_flags(page):
            known = anywhere if command is None else by_command[command] | set(beam_flags())
            if flag not in known:
                where = page.relative_to(ROOT)
                problems.append(f"{where}: `{span}`: {flag} is no option of {command or 'nmtpipe'}")
    assert not problems, "\n".join(problems)


RUN_TIME = re.compile(r" in (?:(\d+):(\d\d)|(\d+) s)\b")  # 18:24, 161 s
STATED = re.compile(r"about (\d+) minutes|(\d+)-minute|half an hour")


def test_the_bundled_runs_take_the_time_the_latest_figures_give():
    # How long the demo and the recipe take is stated in the README, the manual, `nmtpipe
    # run --help` and the bundled configs; each must be the latest figure of one of them in
    # RESULTS.md (which README and the benchmarks page show), rounded to minutes.
    results = (ROOT / "benchmarks/RESULTS.md").read_text(encoding="utf-8")
    minutes = set()
    for row in results.split("## Latest figures", 1)[1].split("\n## ", 1)[0].splitlines():
        if row.startswith("| the ") and "`nmtpipe run --example" in row:
            found = RUN_TIME.search(row)
            assert found, row
            seconds = int(found[1]) * 60 + int(found[2]) if found[1] else int(found[3])
            minutes.add(round(seconds / 60))
    assert len(minutes) == 2, minutes  # the demo's and the recipe's
    texts = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in PAGES}
    for config in (ROOT / "pipelines/example").glob("*.yaml"):
        texts[str(config.relative_to(ROOT))] = config.read_text(encoding="utf-8")
    texts["nmtpipe run --help"] = _command_parser(build_parser("run"), "run").format_help()
    problems = [
        f"{where}: '{match[0]}'"
        for where, text in texts.items()
        for match in STATED.finditer(" ".join(text.split()))
        if int(match[1] or match[2] or 0) not in minutes
    ]
    assert not problems, f"not the latest figures ({sorted(minutes)} minutes):\n" + "\n".join(
        problems
    )


def test_the_benchmarks_page_opens_with_the_figures_and_leaves_the_history_to_its_page():
    # A reader's contents: the latest figures and how to reproduce them, no dated entries.
    text = (ROOT / "docs/benchmarks.md").read_text(encoding="utf-8")
    headings = re.findall(r"^(#+) (.+)$", text, re.M)
    assert [h for _, h in headings[:3]] == ["Benchmarks", "Latest figures", "How to reproduce"]
    dated = [h for _, h in headings if re.search(r"\d{4}-\d\d-\d\d|\bissue \d+", h)]
    assert dated == []
    assert "](benchmark-history.md#" in text  # each figure links to its record
