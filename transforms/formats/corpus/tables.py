"""`--table URL`: tables of pairs found, their formats told and their fields chosen.

A URL may be a file, a glob, or a folder `datasets`' `save_to_disk` wrote (its Arrow
files, in the order its `state.json` lists them); any fsspec URL, the Hub's
`hf://datasets/OWNER/NAME/PATH` among them (with `huggingface_hub`: the `hf` extra). The
format is the file's suffix (`.parquet`, `.jsonl`/`.json`/`.ndjson`, `.arrow`, `.tmx`, a
compression suffix after it allowed where the format streams) unless named. The fields
are the ones named, else found in the schema (`fields.default_fields`): read here, on the
driver, from a Parquet footer, an Arrow file's first message or a JSON file's first line,
so that a table without them is refused before any pipeline starts.
"""

from __future__ import annotations

import json
import os

from nmtpipe.transforms.errors import ConfigError, InputError
from nmtpipe.transforms.formats.corpus import arrow_files, jsonl
from nmtpipe.transforms.formats.corpus.fields import checked_fields
from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.storage.encodings import UTF8
from nmtpipe.transforms.storage.inputs import (
    ARROW,
    JSONL,
    PARQUET,
    TMX,
    CorpusInput,
    base_of,
    compression_of,
    file_name,
    resolve_files,
    without_compression,
)

AUTO = "auto"
FORMATS = (AUTO, PARQUET, JSONL, ARROW, TMX)
SUFFIXES = {
    ".parquet": PARQUET, ".pq": PARQUET,
    ".jsonl": JSONL, ".json": JSONL, ".ndjson": JSONL,
    ".arrow": ARROW, ".feather": ARROW,
    ".tmx": TMX,
}  # fmt: skip
_SEEKED = (PARQUET, ARROW)  # read in parts: no compression around them
_SAVED_STATE = "state.json"  # in a folder `Dataset.save_to_disk` wrote
_SAVED_SPLITS = "dataset_dict.json"  # in one `DatasetDict.save_to_disk` wrote


def format_of(url: str, named: str = AUTO) -> str:
    """The table format of `url`: `named`, else its suffix's."""
    if named != AUTO:
        return named
    name = without_compression(file_name(url)).lower()
    found = SUFFIXES.get(os.path.splitext(name)[1])
    if found is None:
        known = ", ".join(SUFFIXES)
        raise ConfigError(
            f"{url}: cannot tell a table's format from its name (known: {known}); "
            "name it with --table-format"
        )
    return found


def _saved_dataset(url: str) -> list[str] | None:
    """The Arrow files of a folder `save_to_disk` wrote, in order; None for a file."""
    fs, path = fsio.url_to_fs(url)
    if not fs.isdir(path):
        return None
    if fs.exists(f"{path}/{_SAVED_SPLITS}"):
        splits = json.loads(fs.cat_file(f"{path}/{_SAVED_SPLITS}")).get("splits", [])
        raise ConfigError(
            f"{url} holds the splits {', '.join(splits)}: give one, e.g. {url.rstrip('/')}/"
            f"{splits[0] if splits else 'train'}, with --table, --valid-table or --test-table"
        )
    if not fs.exists(f"{path}/{_SAVED_STATE}"):
        raise ConfigError(f"{url} is a folder: give its files (a glob such as {url}/*.parquet)")
    state = json.loads(fs.cat_file(f"{path}/{_SAVED_STATE}"))
    names = [f["filename"] for f in state.get("_data_files", [])]
    for name in names:
        if not _inside(name):
            raise InputError(f"{url}/{_SAVED_STATE} names {name}, outside its folder")
    return [fsio.join(url, name) for name in names]


def _inside(name: str) -> bool:
    """Whether a file a `state.json` names is in its folder (no absolute path, no `..`)."""
    parts = name.replace("\\", "/").split("/")
    return bool(name) and not name.startswith("/") and ".." not in parts and ":" not in name


def _option(role: str) -> str:
    """The option that gives a table of `role`."""
    return "--table" if role == "train" else f"--{role}-table"


def resolve_tables(
    pattern: str,
    role: str,
    langs: tuple[str, str],
    named_format: str = AUTO,
    fields: tuple[str, str] | None = None,
) -> list[CorpusInput]:
    """The tables a `--table` URL, glob or saved folder names, each with its format and
    its two fields (for a TMX, its two languages)."""
    base = base_of("://" not in pattern and not os.path.isabs(pattern))
    urls = _saved_dataset(pattern) if "::" not in pattern else None
    inputs = []
    for url in urls if urls is not None else resolve_files(pattern, _option(role)):
        fmt = format_of(url, named_format if urls is None else ARROW)
        if fmt in _SEEKED and compression_of(url) is not None:
            raise ConfigError(f"{url}: a compressed {fmt} file cannot be read in parts; unpack it")
        inp = CorpusInput(role, url, None, base=base, layout=fmt, encodings=(UTF8, UTF8))
        inputs.append(_with_fields(inp, fields, langs))
    return inputs


def _with_fields(
    inp: CorpusInput, given: tuple[str, str] | None, langs: tuple[str, str]
) -> CorpusInput:
    if inp.layout == TMX:
        return _replace(inp, given or langs)
    if inp.layout == JSONL:
        tree = jsonl.first_object(inp)
        if not tree:
            raise InputError(f"{inp.src}: its first line is not a JSON object")
    else:
        tree = arrow_files.tree(inp)
    return _replace(inp, checked_fields(tree, given, langs, inp.src))


def _replace(inp: CorpusInput, fields: tuple[str, str]) -> CorpusInput:
    return CorpusInput(
        inp.role, inp.src, None, inp.columns, inp.base, inp.layout, fields, inp.encodings
    )
