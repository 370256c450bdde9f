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

import dataclasses
import json
import os
from typing import Any

from nmtpipe.transforms.corpus import registry
from nmtpipe.transforms.corpus.fields import checked_fields
from nmtpipe.transforms.corpus.inputs import CorpusInput, compression_of
from nmtpipe.transforms.corpus.registry import AUTO
from nmtpipe.transforms.corpus.resolve import base_of, resolve_files
from nmtpipe.transforms.errors import ConfigError, InputError
from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.storage.encodings import UTF8

_SAVED_STATE = "state.json"  # in a folder `Dataset.save_to_disk` wrote
_SAVED_SPLITS = "dataset_dict.json"  # in one `DatasetDict.save_to_disk` wrote


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
    options: Any = None,
) -> list[CorpusInput]:
    """The tables a `--table` URL, glob or saved folder names, each with its reader, the
    reader's `options` (`registry.options_config`'s) and its two fields (for a TMX, its
    two languages)."""
    base = base_of("://" not in pattern and not os.path.isabs(pattern))
    urls = _saved_dataset(pattern) if "::" not in pattern else None
    inputs = []
    for url in urls if urls is not None else resolve_files(pattern, _option(role)):
        name = registry.table_format(url, named_format if urls is None else "arrow")
        reader = registry.table_reader(name)
        if not reader.COMPRESSIBLE and compression_of(url) is not None:
            raise ConfigError(f"{url}: a compressed {name} file cannot be read in parts; unpack it")
        inp = CorpusInput(
            role, url, None, base=base, reader=name, encodings=(UTF8, UTF8),
            options=registry.chosen_options(name, options),
        )  # fmt: skip
        tree = reader.fields(inp)
        chosen = (fields or langs) if tree is None else checked_fields(tree, fields, langs, url)
        inputs.append(dataclasses.replace(inp, fields=chosen))
    return inputs
