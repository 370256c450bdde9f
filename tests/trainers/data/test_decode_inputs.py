"""The texts a split is scored against: the references as the user gave them."""

from __future__ import annotations

from nmtpipe.pipelines.workflow.encode import EncodeConfig, run_encode
from nmtpipe.pipelines.workflow.prepare import run_prepare
from nmtpipe.pipelines.workflow.prepare_plan import PrepareConfig
from nmtpipe.pipelines.workflow.vocab import VocabConfig, run_vocab
from nmtpipe.trainers.data.decode_inputs import TextCodec, prepared_source_text, split_sentences
from nmtpipe.transforms.formats.encoded_dataset import open_dataset
from nmtpipe.transforms.vocab.vocabulary import open_vocabulary
from tests.helpers import IN_MEMORY, example_lines, write_pair


def test_split_references_are_the_lines_as_read(tmp_path):
    """Normalisation turns full-width letters and doubled spaces into what the model
    reads; the references of the test split stay as they were given."""
    en = example_lines("tatoeba-cmn", "en")[::10]
    zh = example_lines("tatoeba-cmn", "zh")[::10]
    given = [("Ｔom  " + e, z.replace("。", "。  ")) for e, z in zip(en, zh, strict=True)]
    corpus = write_pair(tmp_path / "c", [s for s, _ in given], [t for _, t in given])
    prepared, vocab, encoded = (str(tmp_path / n) for n in ("prepared", "vocab", "encoded"))
    run_prepare(PrepareConfig("en", "zh", prepared, trainpref=(str(corpus),),
                              test_fraction=0.05), IN_MEMORY)  # fmt: skip
    run_vocab(VocabConfig(prepared, vocab, "bpe-hf", 600, joined=True), IN_MEMORY)
    run_encode(EncodeConfig(prepared, vocab, encoded), IN_MEMORY)
    data = open_dataset(encoded, "arrow")
    codec = TextCodec(open_vocabulary(vocab), data.manifest["languages"], "arrow")
    sentences = list(split_sentences(data["test"], "test", data.manifest, codec))
    assert len(sentences) > 50
    raw = set(given)
    assert all((s.source, s.reference) in raw for s in sentences)
    assert all(s.source.startswith("Ｔom  ") for s in sentences)


def test_raw_chinese_sources_are_converted_as_prepare_converted_them(tmp_path):
    """A zh→en model trained on sources that `prepare --zh-script simplified` converted
    reads raw Traditional input as the Simplified text it was trained on."""
    zh = example_lines("tatoeba-cmn", "zh")[::20]
    en = example_lines("tatoeba-cmn", "en")[::20]
    corpus = write_pair(tmp_path / "c", zh, en, langs=("zh", "en"))
    prepared, vocab, encoded = (str(tmp_path / n) for n in ("prepared", "vocab", "encoded"))
    run_prepare(PrepareConfig("zh", "en", prepared, trainpref=(str(corpus),),
                              zh_script="simplified"), IN_MEMORY)  # fmt: skip
    run_vocab(VocabConfig(prepared, vocab, "bpe-hf", 600, joined=True), IN_MEMORY)
    run_encode(EncodeConfig(prepared, vocab, encoded), IN_MEMORY)
    manifest = open_dataset(encoded, "arrow").manifest
    source_text = prepared_source_text(manifest, required=True)
    assert source_text.script == "simplified"
    codec = TextCodec(open_vocabulary(vocab), manifest["languages"], "arrow", source_text)
    traditional, simplified = codec.encode_sources(["我的頭髮很長。", "我的头发很长。"])
    assert traditional.tolist() == simplified.tolist()
    as_written = TextCodec(open_vocabulary(vocab), manifest["languages"], "arrow")
    assert as_written.encode_sources(["我的頭髮很長。"])[0].tolist() != simplified.tolist()
