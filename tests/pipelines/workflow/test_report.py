"""The dataset report: built from real outputs, opened in a real (headless) browser."""

from __future__ import annotations

import json

import pytest

from nmtpipe.pipelines.cli.main import main
from nmtpipe.pipelines.workflow import report_plots as plots
from nmtpipe.pipelines.workflow.encode import EncodeConfig, run_encode
from nmtpipe.pipelines.workflow.prepare import run_prepare
from nmtpipe.pipelines.workflow.prepare_plan import PrepareConfig
from nmtpipe.pipelines.workflow.vocab import VocabConfig, run_vocab
from tests.browser import open_page, require_browser
from tests.helpers import DATA, IN_MEMORY, command_result, example_lines, write_pair

# Every plot drawn: an SVG with a size and shapes in it.
# Each plot's caption, size and shapes; the short words and numbers of the tables, and
# those drawn on more than one line.
PAGE = """(() => {
  const figures = [...document.querySelectorAll('figure.plot')];
  const plots = figures.map(f => {
    const svg = f.querySelector('svg');
    const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    const shapes = svg ? svg.querySelectorAll('path, rect, line, polyline').length : 0;
    return [f.querySelector('figcaption').textContent, box.width, box.height, shapes];
  });
  const lines = cell => {
    const range = document.createRange();
    range.selectNodeContents(cell);
    return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;
  };
  const words = [...document.querySelectorAll('td.word')];
  const broken = words.filter(w => lines(w) > 1).map(w => w.textContent);
  return {plots, words: words.length, broken};
})()"""


@pytest.fixture(scope="module")
def encoded(tmp_path_factory):
    """A small noisy corpus (Tatoeba, Japanese targets, a leaked test pair), prepared,
    given a vocabulary and encoded."""
    folder = tmp_path_factory.mktemp("report")
    en, zh = example_lines("tatoeba-cmn", "en")[::40], example_lines("tatoeba-cmn", "zh")[::40]
    ja = (DATA / "langid" / "ntrex128-jpn.txt").read_text(encoding="utf-8").splitlines()[:10]
    eng = (DATA / "langid" / "ntrex128-eng.txt").read_text(encoding="utf-8").splitlines()[:10]
    write_pair(folder / "train", en + eng + [en[0]], zh + ja + [zh[0]])
    write_pair(folder / "test", [en[5]], ["另一个翻译。"])  # its source leaks into train
    prepared = str(folder / "prepared")
    run_prepare(
        PrepareConfig("en", "zh", prepared, trainpref=(str(folder / "train"),),
                      testpref=(str(folder / "test"),), zh_script="simplified"),
        IN_MEMORY,
    )  # fmt: skip
    vocab = str(folder / "vocab")
    run_vocab(VocabConfig(prepared, vocab, vocab_size=600, joined=True), IN_MEMORY)
    out = str(folder / "encoded")
    run_encode(EncodeConfig(prepared, vocab, out), IN_MEMORY)
    return folder


def test_the_report_says_what_happened(encoded, capsys):
    assert main(["report", str(encoded / "encoded")]) == 0
    path = command_result(capsys.readouterr().out)["report"]
    assert path == str(encoded / "encoded" / "report.html")
    page = (encoded / "encoded" / "report.html").read_text(encoding="utf-8")
    for expected in ("wrong-language", "overlap", "duplicate", "&lt;unk&gt; rate", "fertility",
                     "Most frequent pieces", "lines to simplified", "limit 5"):  # fmt: skip
        assert expected in page, expected
    # Self-contained: no script, nothing fetched (the only URLs are SVG's namespaces).
    assert "<script" not in page and "src=" not in page and "<link" not in page
    # A prepared output alone gets the first half.
    assert main(["report", str(encoded / "prepared")]) == 0
    assert "fertility" not in (encoded / "prepared" / "report.html").read_text(encoding="utf-8")


def test_the_length_ratio_plot_draws_every_pair_in_its_bin(encoded, monkeypatch):
    drawn = {}
    real = plots.histograms

    def spy(hists, xlabel, step=1.0, *args):
        drawn[xlabel] = (hists, step)
        return real(hists, xlabel, step, *args)

    monkeypatch.setattr(plots, "histograms", spy)
    main(["report", str(encoded / "prepared")])
    hists, step = drawn["longer side / shorter side"]
    ratios = hists["pairs"]  # bins of 1/step, as stats.json counts them
    stats = json.loads((encoded / "prepared" / "stats.json").read_text(encoding="utf-8"))
    expected = {int(k): v for k, v in stats["length_ratio_hist"].items()}
    assert ratios == expected and step == 0.1
    assert min(ratios) * step >= 1.0 and sum(ratios.values()) > 0


def test_the_report_opens_in_a_browser_with_every_plot_drawn_and_words_whole(encoded, tmp_path):
    browser = require_browser()
    main(["report", str(encoded / "encoded")])
    shot = tmp_path / "report.png"
    page = open_page(browser, encoded / "encoded" / "report.html", PAGE, shot)
    assert page.errors == []
    plots = page.value["plots"]
    assert len(plots) == 6 + 2, plots  # and one per score column: lexical, length
    for caption, width, height, shapes in plots:
        assert width > 100 and height > 50 and shapes > 3, caption
    assert shot.stat().st_size > 10_000
    # Short words and numbers are never broken inside ("7,66 8"), whatever their column.
    assert page.value["words"] > 20 and page.value["broken"] == []
