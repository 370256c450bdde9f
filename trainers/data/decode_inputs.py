"""What `nmtpipe decode` translates: a split of an encoded dataset, or raw text files.

Both become a stream of `Sentence`s (source ids in the id space the model was trained
in, the source text and the reference, if any), read lazily and cut into windows, so
no input is ever held whole. Raw text goes through what training data went through:
the `prepare` step's normalisation and, for a Chinese source it converted, OpenCC's
script conversion, then the vocabulary. A split's texts come from the
prepared Parquet shards the encoded split was made from (in the same order); if those
are gone, from the ids themselves, detokenised.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from nmtpipe.transforms.errors import InputError
from nmtpipe.transforms.formats.encoded_dataset import SplitData
from nmtpipe.transforms.formats.prepared import read_prepared
from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.storage.manifest import parquet_row_groups, read_parquet_entry
from nmtpipe.transforms.text.normalize import NormalizeConfig, Normalizer
from nmtpipe.transforms.text.zh_script import ScriptConverter
from nmtpipe.transforms.vocab import id_layout
from nmtpipe.transforms.vocab.vocabulary import Vocabulary

_ENCODE_BATCH = 1000  # lines normalised and encoded per call


@dataclass(frozen=True)
class Sentence:
    index: int  # its place in the input: outputs are written in this order
    ids: np.ndarray  # source ids in the model's id space, ending in EOS
    source: str
    reference: str | None


@dataclass(frozen=True)
class SourceText:
    """What `prepare` did to a raw source line before training read it: its
    normalisation options and the Chinese script it converted to (None: none)."""

    normalize: dict[str, Any] = field(default_factory=dict)
    script: str | None = None


class TextCodec:
    """Text ↔ the model's ids for one language pair, as training saw them."""

    def __init__(
        self, vocab: Vocabulary, langs: dict[str, str], fmt: str, source: SourceText = SourceText()
    ) -> None:
        self.src_lang, self.tgt_lang = langs["src"], langs["tgt"]
        self.model = vocab.model
        self._layout = vocab.kind.layout
        self._fairseq_ids = fmt == "fairseq"
        self._normalizer = Normalizer(NormalizeConfig(**source.normalize))
        self._convert = None if source.script is None else ScriptConverter(source.script)  # type: ignore[arg-type]
        self._encoders = {lang: vocab.encoder(lang) for lang in {self.src_lang, self.tgt_lang}}

    def encode_sources(self, lines: list[str]) -> list[np.ndarray]:
        """Raw source lines as training saw them: normalised, converted, encoded."""
        lines = self._normalizer.batch(lines)
        if self._convert is not None:
            lines, _ = self._convert(lines)
        return self.encode(self.src_lang, lines)

    def encode(self, lang: str, lines: list[str]) -> list[np.ndarray]:
        """Lines of `lang` already prepared (a prepared shard's) as the model's ids, each
        ending in EOS."""
        flat, lengths = self._encoders[lang].encode_batch(lines)
        if self._fairseq_ids:
            flat = id_layout.to_fairseq(self._layout, flat)
        return np.split(flat.astype(np.int64), np.cumsum(lengths)[:-1])

    def decode(self, lang: str, ids: Iterable[int]) -> str:
        """Text of model ids (EOS and padding dropped by the caller)."""
        ids = np.fromiter(ids, np.int64)
        if self._fairseq_ids:
            ids = id_layout.from_fairseq(self._layout, ids)
        return self._encoders[lang].decode(ids.tolist())


def read_lines(url: str) -> Iterator[str]:
    """The lines of a text file on any fsspec URL (compressed by suffix), without their
    line ends (LF or CRLF); invalid UTF-8 is an error naming the file and line."""
    fs, path = fsio.url_to_fs(url)
    if not fs.exists(path):
        raise InputError(f"{url}: no such file")
    with fs.open(path, "rb", compression="infer") as f:
        for number, raw in enumerate(f, start=1):
            yield decode_line(raw, url, number)


def count_lines(urls: Iterable[str]) -> int:
    """How many lines `read_lines` gives of the files at `urls`, counted in blocks (a
    progress display's total, known before any is translated)."""
    total = 0
    for url in urls:
        fs, path = fsio.url_to_fs(url)
        if not fs.exists(path):
            raise InputError(f"{url}: no such file")
        with fs.open(path, "rb", compression="infer") as f:
            total += count_stream_lines(f)
    return total


def count_stream_lines(stream: Any) -> int:
    """The lines of a binary stream, read to its end (a last line without its line end
    counted too)."""
    count, last = 0, b"\n"
    for block in iter(lambda: stream.read(1 << 20), b""):
        count += block.count(b"\n")
        last = block[-1:]
    return count + (last != b"\n")


def decode_line(raw: bytes, name: str, number: int) -> str:
    """One line's text without its line end (LF or CRLF); invalid UTF-8 is an error
    naming the file and line."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{name}:{number}: not UTF-8 ({e.reason} at byte {e.start})") from None
    return line.rstrip("\n").removesuffix("\r")


def _lines_of(urls: Iterable[str]) -> Iterator[str]:
    return itertools.chain.from_iterable(read_lines(u) for u in urls)


def text_sentences(
    inputs: list[str], references: list[str], codec: TextCodec
) -> Iterator[Sentence]:
    """The lines of `inputs` (one sentence each), with the lines of `references` if given."""
    missing = object()
    sources = _lines_of(inputs)
    refs: Iterator[Any] = _lines_of(references) if references else itertools.repeat(None)
    index = 0
    while chunk := list(itertools.islice(sources, _ENCODE_BATCH)):
        chunk_refs = [next(refs, missing) for _ in chunk]
        if any(r is missing for r in chunk_refs):
            raise InputError(
                f"{', '.join(references)} end(s) before {', '.join(inputs)}: one reference "
                "line is needed per input line"
            )
        for ids, source, ref in zip(codec.encode_sources(chunk), chunk, chunk_refs, strict=True):
            yield Sentence(index, ids, source, ref)
            index += 1
    if references and next(refs, missing) is not missing:
        raise InputError(
            f"{', '.join(references)} have more lines than {', '.join(inputs)} ({index})"
        )


def prepared_sources(encode_doc: dict[str, Any]) -> list[dict[str, str]]:
    """The prepared outputs an encoded dataset was made from, in order (one, or a
    version's parts)."""
    info = encode_doc["prepared"]
    return info if isinstance(info, list) else [info]


def prepared_source_text(encode_doc: dict[str, Any], required: bool) -> SourceText:
    """How the prepare step turned raw source lines into training text (raw input must
    go the same way); a `SourceText()` that does nothing when its output is gone and
    nothing raw is to be read (`required` False)."""
    url = prepared_sources(encode_doc)[0]["url"]  # a version's parts share the options
    try:
        _, prepared = read_prepared(url)
    except (InputError, OSError) as e:
        if required:
            raise InputError(
                f"raw text needs the prepare step's normalisation, but its output {url} "
                f"cannot be read: {e}"
            ) from e
        return SourceText()
    options = prepared["options"]
    normalize = options["normalize"]
    script = options.get("zh_script", {}).get("src")  # older outputs say nothing: none
    return SourceText(normalize.get("src", normalize), script)  # older: one for both sides


def _prepared_texts(encode_doc: dict[str, Any], split: str) -> Iterator[tuple[str, str]] | None:
    """The (source, target) texts of `split` from the prepared shards the encoded split
    came from, in the same order, as the user gave them (the lines read, where `prepare`
    kept them because normalisation changed them); None when the shards are gone or
    were made again since."""
    found = []
    for info in prepared_sources(encode_doc):
        try:
            root, doc = read_prepared(info["url"])
        except (InputError, OSError):
            return None
        if doc["fingerprint"] != info["fingerprint"]:
            return None
        if split in doc["splits"]:
            # A version's parts come with the rows the version leaves out.
            skip = set(info.get("excluded", {}).get(split, ()))
            found.append((root, doc, doc["splits"][split]["files"], skip))

    def rows() -> Iterator[tuple[str, str]]:
        for root, doc, paths, skip in found:
            entries = {f["path"]: f for f in doc["files"]}
            row = 0
            for path in paths:
                for group in range(len(parquet_row_groups(root, entries[path]))):
                    table = read_parquet_entry(root, entries[path], None, [group])
                    for pair in zip(_as_given(table, "src"), _as_given(table, "tgt"), strict=True):
                        if row not in skip:
                            yield pair
                        row += 1

    return rows()


def _as_given(table: pa.Table, side: str) -> list[str]:
    """A side's lines as read, where the shard has them (older shards do not)."""
    kept = table.column(side).to_pylist()
    if f"{side}_raw" not in table.column_names:
        return kept
    raw = table.column(f"{side}_raw").to_pylist()
    return [text if line is None else line for text, line in zip(kept, raw, strict=True)]


def split_sentences(
    data: SplitData, split: str, encode_doc: dict[str, Any], codec: TextCodec
) -> Iterator[Sentence]:
    """Every pair of an encoded split, in order, its target text as the reference."""
    texts = _prepared_texts(encode_doc, split)
    for i in range(len(data)):
        src, tgt = data[i]
        if texts is None:
            source = codec.decode(codec.src_lang, src[:-1])
            reference = codec.decode(codec.tgt_lang, tgt[:-1])
        else:
            source, reference = next(texts)
        yield Sentence(i, src.astype(np.int64), source, reference)


def windows(sentences: Iterator[Sentence], size: int) -> Iterator[list[Sentence]]:
    """Consecutive lists of `size` sentences (the last one shorter)."""
    while window := list(itertools.islice(sentences, size)):
        yield window
