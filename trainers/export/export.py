"""`nmtpipe export`: a checkpoint as a Hugging Face MarianMT folder or a CTranslate2 model.

The folder holds everything a user of that library needs and nothing of nmtpipe: the
weights (`marian_weights.py`), `generation_config.json` with nmtpipe's search as far as
Transformers can express it, a `tokenizer.json` that turns raw text into the ids
`nmtpipe decode --input` gives it (the prepare step's normalisation, then the
vocabulary: a SentencePiece model as `transforms/vocab/tokenizer_json.py` writes it, or
the `tokenizers` vocabulary's own file), and a model card. The
CTranslate2 format is CTranslate2's converter run on that folder
(`ctranslate2_convert.py`), with the tokenizer files beside it.

The files are built in a local temporary folder, copied to `--output` (any fsspec URL)
and committed by `manifest.json`, written last: the same checkpoint and options again
say `cached:`. Refused in one line: T2T SubwordTextEncoder vocabularies (no
`tokenizer.json` reproduces T2T's escaping), per-language vocabularies (one tokenizer
holds one vocabulary), pre-norm models and other architectures.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections.abc import Callable
from typing import Any

from transformers import GenerationConfig

from nmtpipe import __version__
from nmtpipe.trainers.data.decode_inputs import prepared_source_text, prepared_sources
from nmtpipe.trainers.export import ctranslate2_convert, marian_weights
from nmtpipe.trainers.export.export_config import KIND, ExportConfig
from nmtpipe.trainers.export.model_card import model_card
from nmtpipe.trainers.runtime import checkpoint
from nmtpipe.transforms.errors import ConfigError, InputError
from nmtpipe.transforms.formats.encoded_dataset import committed_doc
from nmtpipe.transforms.storage import fsio, manifest
from nmtpipe.transforms.storage.commit import building, commit, reuse_committed
from nmtpipe.transforms.storage.manifest import file_entry
from nmtpipe.transforms.text.normalize import NormalizeConfig
from nmtpipe.transforms.vocab import tokenizer_json
from nmtpipe.transforms.vocab.id_layout import IdLayout
from nmtpipe.transforms.vocab.vocabulary import Vocabulary, open_vocabulary

# The search the export's generation config describes: `nmtpipe decode --beam 4
# --lenpen 1.0 --max-len-a 0 --max-len-b 200` (EOS forced after 200 tokens).
BEAM, LENPEN, MAX_LEN = 4, 1.0, 200
_OURS = re.compile(r"^(?!manifest\.json$)[^/]+$")


def generation_config(layout: IdLayout) -> GenerationConfig:
    """nmtpipe's search as Transformers' `generate` runs it: beam 4, score / length with
    EOS counted, a sentence done when 4 hypotheses finished (`early_stopping=True`), EOS
    forced at the length limit, padding and `<s>` never generated. (nmtpipe's default
    T2T rules — the GNMT penalty and T2T's stopping bound — have no HF equivalent.)"""
    never = [[i] for i in (layout.pad, layout.bos) if i is not None and i != layout.eos]
    return GenerationConfig(
        num_beams=BEAM, length_penalty=LENPEN, early_stopping=True, do_sample=False,
        max_new_tokens=MAX_LEN + 1, bad_words_ids=never, forced_eos_token_id=layout.eos,
        decoder_start_token_id=layout.eos, eos_token_id=layout.eos, pad_token_id=layout.pad,
        bos_token_id=layout.bos,
    )  # fmt: skip


class _Source:
    """What the checkpoint was trained on: the encoded data, its vocabulary, how its
    text was normalised."""

    def __init__(self, state: dict[str, Any], url: str) -> None:
        train = state.get("train_config", {})
        if not train.get("data"):
            raise InputError(f"{url} does not say what data it was trained on")
        self.doc = committed_doc(train["data"])
        self.format = train.get("format") or self.doc["formats"][0]
        self.layout = IdLayout(**self.doc["id_layouts"][self.format])
        checkpoint.check_match(state, url, self.doc, train["data"], self.format)
        self.vocab: Vocabulary = open_vocabulary(self.doc["vocab"]["url"])
        if self.vocab.kind.export_refusal is not None:
            raise ConfigError(f"{url} {self.vocab.kind.export_refusal}")
        if not self.doc["joined"]:
            raise ConfigError(
                f"{url} has one vocabulary per language; a Transformers tokenizer holds "
                "one: export models trained on a joined vocabulary (nmtpipe vocab --joined)"
            )
        self.prepared_url = prepared_sources(self.doc)[0]["url"]
        source_text = prepared_source_text(self.doc, required=True)
        if source_text.script is not None:
            raise ConfigError(
                f"{url} was trained on Chinese sources converted to {source_text.script} "
                "script by prepare --zh-script (OpenCC), which no tokenizer.json reproduces; "
                "export models whose Chinese source side was kept as written"
            )
        self.normalize = source_text.normalize
        self.splits = self.doc["splits"]

    def tokenizer(self, size: int) -> Any:
        side = self.vocab.side_of(self.doc["languages"]["src"])
        model_file = self.vocab.doc["vocabularies"][side]["files"][0]
        model = self.vocab.read(fsio.join(self.vocab.root, model_file))
        try:
            tok = self.vocab.kind.tokenizer(model, size)
        except tokenizer_json.NotExpressible as e:
            msg = f"{self.vocab.root}: {e} cannot be exported exactly"
            raise ConfigError(msg) from None
        return tokenizer_json.with_normalization(tok, NormalizeConfig(**self.normalize))


def _facts(config: ExportConfig, state: dict[str, Any], source: _Source) -> dict[str, Any]:
    scores = json.loads(fsio.read_bytes(config.scores)) if config.scores else None
    return {
        "checkpoint": config.checkpoint,
        "languages": source.doc["languages"],
        "train_config": state.get("train_config", {}),
        "model_config": state["model_config"],
        "updates": state.get("position", {}).get("update", 0),
        "best_valid_loss": state.get("best"),
        "vocab": {"model": source.vocab.model, "joined": source.doc["joined"],
                  "fingerprint": source.vocab.fingerprint},
        "data": {"url": source.doc.get("url", state["train_config"]["data"]),
                 "fingerprint": source.doc["fingerprint"], "prepared": source.prepared_url,
                 "splits": source.splits, "normalize": source.normalize},
        "scores": scores,
    }  # fmt: skip


def build(config: ExportConfig, folder: str, log: Callable[[str], None]) -> None:
    """Write the export into the local `folder`."""
    state = checkpoint.load(config.checkpoint)
    model_config = marian_weights.check_exportable(
        state["model_config"], state.get("train_config", {}).get("arch"), config.checkpoint
    )
    source = _Source(state, config.checkpoint)
    hf_folder = folder if config.format == "hf" else os.path.join(folder, ".hf")
    log(f"writing the MarianMT model of {config.checkpoint}")
    model = checkpoint.model_from(state)
    marian_weights.save_marian(
        marian_weights.to_marian(model, source.layout, config.max_positions), hf_folder
    )
    generation_config(source.layout).save_pretrained(hf_folder)
    tok = source.tokenizer(model_config.tgt_vocab)
    eos = tok.id_to_token(source.layout.eos)
    tokenizer_files = tokenizer_json.write_files(tok, eos, config.max_positions)
    card = model_card(_facts(config, state, source), config.format).encode("utf-8")
    for name, data in {**tokenizer_files, "README.md": card}.items():
        with open(os.path.join(hf_folder, name), "wb") as f:
            f.write(data)
    if config.format == "ctranslate2":
        log(f"converting with CTranslate2 ({config.quantization or 'float32'})")
        ctranslate2_convert.convert(hf_folder, os.path.join(folder, "ct2"), config.quantization)
        for name in os.listdir(os.path.join(folder, "ct2")):
            os.replace(os.path.join(folder, "ct2", name), os.path.join(folder, name))
        for name, data in {**tokenizer_files, "README.md": card}.items():
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)


def _scores_sha256(url: str) -> str:
    try:
        return fsio.sha256_of(url)
    except FileNotFoundError:
        raise InputError(f"no scores file at {url} (--scores: a decode's scores.json)") from None


def run_export(config: ExportConfig, force: bool = False,
               log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:  # fmt: skip
    """Export unless `config.output` already holds this export; the committed manifest."""
    started = time.perf_counter()
    out = fsio.canonical_url(config.output)
    fingerprint = manifest.fingerprint({
        "step": KIND, "code_version": __version__,
        "checkpoint": checkpoint.sha256(config.checkpoint),
        "scores": _scores_sha256(config.scores) if config.scores else None,
        **{k: v for k, v in config.__dict__.items() if k not in ("checkpoint", "output", "scores")},
    })  # fmt: skip
    with building(out, _OURS):  # a refused checkpoint leaves no output folder
        committed = reuse_committed(out, KIND, fingerprint, force, log, replace=True)
        cached = committed is not None
        if committed is None:
            committed = _export(config, out, fingerprint, log)
    return {**committed, "output": out, "cached": cached,
            "seconds": round(time.perf_counter() - started, 2)}  # fmt: skip


def _export(config: ExportConfig, out: str, fingerprint: str, log: Callable[[str], None]) -> dict:
    """Build the export locally, upload it to `out` and commit it; the manifest."""
    with tempfile.TemporaryDirectory(prefix="nmtpipe-export-") as folder:
        build(config, folder, log)
        files = [
            file_entry(out, fsio.upload(os.path.join(folder, name), fsio.join(out, name)),
                       "export", 0)
            for name in sorted(os.listdir(folder))
            if os.path.isfile(os.path.join(folder, name))
        ]  # fmt: skip
    doc = {
        "kind": KIND, "code_version": __version__, "fingerprint": fingerprint,
        "checkpoint": config.checkpoint, "format": config.format,
        "options": {k: v for k, v in config.__dict__.items() if k != "output"},
        "files": files,
    }  # fmt: skip
    return commit(out, KIND, doc, _OURS)
