"""`nmtpipe report OUTPUT`: one self-contained HTML page about a prepared or encoded
dataset, or a published version, to look at before training on it.

It lives in the workflow room because it is a driver-side step over committed outputs
(it reads manifests, statistics, a few rejects and the encoded shards' sizes, and
writes one file), which `nmtpipe run` and `nmtpipe refresh` call after the steps they
run; the plots are drawn by `report_plots.py`. Nothing in the page loads anything: the
plots are inline SVG and there is no script.

What it shows: pairs read and kept per input, rejects by reason with a few examples
each, length histograms per side, the length-ratio distribution with the filter's
limit, split sizes, lines converted to one Chinese script; after encode, tokens per
sentence, `<unk>` rate and subword fertility (subwords per T2T token) per language, and
the most frequent pieces.
"""

from __future__ import annotations

import html
import json
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from nmtpipe.pipelines.workflow import report_plots as plots
from nmtpipe.transforms.errors import InputError
from nmtpipe.transforms.formats import encoded_dataset, prepared
from nmtpipe.transforms.quality import judge, thresholds
from nmtpipe.transforms.storage import fsio, manifest, versions
from nmtpipe.transforms.text.clean import RATIO_BINS
from nmtpipe.transforms.text.filters import REASONS
from nmtpipe.transforms.text.stats import merge_into
from nmtpipe.transforms.vocab import id_layout, vocabulary

REPORT = "report.html"
EXAMPLES = 3  # rejects shown per reason
PIECES = 20  # most frequent pieces shown per language
# Ids counted per language for the pieces and the <unk> rate (the first pairs): a fixed
# cost of every report, so of every refresh (5M took 20 s of a 1M-pair refresh's 22).
PIECE_SAMPLE = 1_000_000
_SUMMED = (
    "pairs_read",
    "pairs_kept",
    "pairs_rejected",
    "rejects",
    "splits",
    "inputs",
    "converted",
    "length_ratio_hist",
    "scores",
    "matched",
)


def _kind(url: str) -> str:
    if versions.is_version(url):
        return versions.KIND
    try:
        doc = json.loads(fsio.read_bytes(manifest.manifest_url(fsio.canonical_url(url))))
    except FileNotFoundError:
        raise InputError(f"{url} holds no committed output (no manifest.json)") from None
    return doc.get("kind", "")


def _prepared_stats(roots: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The statistics of one prepared output, or of a version's parts summed, and the
    first one's options."""
    total: dict[str, Any] = {}
    options: dict[str, Any] = {}
    for root in roots:
        _, doc = prepared.read_prepared(root)
        options = options or doc["options"]
        stats = json.loads(fsio.read_bytes(fsio.join(root, manifest.STATS_FILE)))
        merge_into(total, {k: stats.get(k, {}) for k in _SUMMED})
        if stats.get("learned_sample"):  # any part's scores learned from a sample
            total["learned_sample"] = True
        for split, info in stats["split_details"].items():
            for side in ("src", "tgt"):
                side_info = info[side]
                merge_into(
                    total.setdefault("length_hist", {}).setdefault(side, {}),
                    side_info["length_hist"],
                )
                if "tokens" in side_info and split == "train":
                    merge_into(total.setdefault("tokens", {}), {side: side_info["tokens"]})
    if len(roots) == 1:  # thresholds its trusted pairs set (a version's parts each set theirs)
        total["calibrated"] = stats.get("calibrated", {})
    return total, options


def _examples(roots: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Up to EXAMPLES rejects per reason, reading reject files only as far as needed."""
    found: dict[str, list[dict[str, Any]]] = {}
    for root in roots:
        _, doc = prepared.read_prepared(root)
        for rel in doc["rejects"]["files"]:
            fs, path = fsio.url_to_fs(fsio.join(root, rel))
            with fs.open(path, "rb") as f:
                reader = pq.ParquetFile(f)
                for g in range(reader.num_row_groups):
                    for row in reader.read_row_group(g).to_pylist():
                        shown = found.setdefault(row["reason"], [])
                        if len(shown) < EXAMPLES:
                            shown.append(row)
    return found


def _text(raw: bytes | None) -> str:
    return "" if raw is None else raw.decode("utf-8", errors="replace")


def _table(head: list[str], rows: list[list[Any]]) -> str:
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(map(_cell, row)) + "</tr>" for row in rows)
    return f"<table><tr>{cells}</tr>{body}</table>"


def _cell(value: Any) -> str:
    """A table cell: a short word or number on one line ("7,66" above "8" was how a
    narrow column drew it); a longer text may be broken anywhere, so that a line of one
    long token does not widen the page."""
    text = str(value)
    word = len(text) <= WORD and " " not in text
    return f"<td{' class=word' if word else ''}>{html.escape(text)}</td>"


def _figure(title: str, svg: str) -> str:
    return f'<figure class="plot"><figcaption>{html.escape(title)}</figcaption>{svg}</figure>'


def _prepared_sections(
    stats: dict[str, Any], options: dict[str, Any], examples: dict, samples: dict
) -> str:
    langs = options["languages"]
    out = []
    inputs = stats.get("inputs", {})
    names = [origin.rsplit("/", 1)[-1] for origin in inputs]
    rows = [
        [
            o,
            f"{i['read']:,}",
            f"{i['kept']:,}",
            f"{sum(i['rejects'].values()):,}",
            ", ".join(f"{side} {name}" for side, name in i.get("encoding", {}).items()),
        ]
        for o, i in inputs.items()
    ]
    head = ["input", "read", "kept", "rejected", "encoding"]
    out.append("<h2>Inputs</h2>" + _table(head, rows))
    out.append(
        _figure(
            "pairs read and kept per input",
            plots.bars(
                names,
                {
                    "read": [i["read"] for i in inputs.values()],
                    "kept": [i["kept"] for i in inputs.values()],
                },
                "pairs",
            ),
        )
    )
    rejects = {r: n for r, n in stats.get("rejects", {}).items() if n}
    out.append("<h2>Rejects</h2>")
    if rejects:
        # the filters' reasons first, then the pair scorers' (`quality/`), as counted
        ordered = [r for r in REASONS if r in rejects] + [r for r in rejects if r not in REASONS]
        out.append(
            _figure(
                "rejects by reason",
                plots.bars(ordered, {"pairs": [rejects[r] for r in ordered]}, "pairs"),
            )
        )
        rows = []
        for reason in ordered:
            for ex in examples.get(reason, []):
                rows.append(
                    [
                        reason,
                        f"{ex['origin']}:{ex['line']}",
                        ex["detail"],
                        _text(ex["src"]),
                        _text(ex["tgt"]),
                    ]
                )
        out.append(_table(["reason", "where", "why", langs["src"], langs["tgt"]], rows))
    else:
        out.append("<p>No pair was rejected.</p>")
    converted = {s: n for s, n in stats.get("converted", {}).items() if n}
    if converted:
        script = options.get("zh_script", {})
        out.append(
            "<p>Converted to one Chinese script (OpenCC): "
            + ", ".join(f"{n:,} {langs[s]} lines to {script.get(s)}" for s, n in converted.items())
            + ".</p>"
        )
    trusted = dict(options.get("trusted", {}))
    if "calibrated" not in stats:  # a version's parts: each its own thresholds
        trusted.pop("keep", None)
    out.append(
        _scores_section(
            stats.get("scores", {}),
            options.get("quality", {}),
            samples,
            trusted,
            bool(stats.get("learned_sample")),
            stats.get("matched", {}),
        )
    )
    splits = stats.get("splits", {})
    out.append("<h2>Splits</h2>")
    out.append(
        _figure(
            "pairs per split", plots.bars(list(splits), {"pairs": list(splits.values())}, "pairs")
        )
    )
    hists = {
        langs[side]: {int(k): v for k, v in stats.get("length_hist", {}).get(side, {}).items()}
        for side in ("src", "tgt")
    }
    out.append("<h2>Lengths</h2>")
    out.append(
        _figure("sentence length, characters (kept pairs)", plots.histograms(hists, "characters"))
    )
    ratio = {int(k): v for k, v in stats.get("length_ratio_hist", {}).items()}
    limit = options["filters"]["max_length_ratio"]
    plot = plots.histograms(
        {"pairs": ratio}, "longer side / shorter side", 1 / RATIO_BINS, limit, f"limit {limit:g}"
    )
    out.append(
        _figure("length ratio, script-weighted characters (every pair with two sides)", plot)
    )
    return "\n".join(out)


def _scores_section(
    scores: dict[str, Any],
    quality: dict[str, Any],
    samples: dict,
    trusted: dict[str, Any],
    sampled: bool,
    matched: dict[str, int],
) -> str:
    """Each pair score: the histogram of kept and rejected pairs with the threshold used
    and the one proposed from the data (`quality/thresholds.py`), and pairs on both
    sides of the threshold; whether learned from a sample of the corpus (and which
    scores of the pairs outside it were `matched` to the sample's, of how many pairs),
    the trusted pairs they were also learned from and the share of them the thresholds
    keep, if any."""
    if not scores:
        return ""
    also = "".join(
        f" and the trusted pairs <code>{html.escape(t['origin'])}</code>"
        for t in trusted.get("pairs", [])
    )
    if trusted.get("keep"):
        also += f", thresholds set where {trusted['keep']:.1%} of those are kept"
    corpus = "this corpus"
    if sampled:
        corpus = (
            f"a sample of about {quality['learn_pairs']:,} of this corpus's pairs (--learn-pairs)"
        )
        corpus += "".join(
            f", the {column} scores of {n:,} pairs outside it matched to the sample's, "
            "quantile for quantile"
            for column, n in matched.items()
        )
    out = [
        "<h2>Pair scores</h2>",
        "<p>Scores beside the pairs (columns <code>score_NAME"
        f"</code>), learned from {corpus}{also}; pairs below a threshold are rejected "
        "with their scores (<code>rejects/</code>).</p>",
    ]
    rows, flags = [], []
    for column, hists in scores.items():
        kept = {int(k): v for k, v in hists.get("kept", {}).items()}
        rejected = {int(k): v for k, v in hists.get("rejected", {}).items()}
        both = dict(kept)
        merge_into(both, rejected)
        used = thresholds.threshold_of(quality, column)
        proposed = thresholds.propose(column, both)
        limits = [] if used is None else ([-used, used] if column == "length" else [used])
        label = "" if used is None else f"threshold {used:g}"
        plot = plots.histograms(
            {"kept": kept, "rejected": rejected}, column, judge.BIN, limits, label
        )
        out.append(_figure(f"{column}: pairs by score", plot))
        if proposed is not None and used is not None and proposed.threshold != used:
            option = thresholds.threshold_option(column).replace("_", "-")
            flags.append(f"--{option} {proposed.threshold:g}")
        rows.append(
            [
                column,
                "-" if used is None else f"{used:g}",
                "-" if proposed is None else f"{proposed.threshold:g}",
                "-" if proposed is None else proposed.method,
                "-" if proposed is None else f"{proposed.kept / proposed.total:.1%}",
                f"{sum(kept.values()):,}",
                f"{sum(rejected.values()):,}",
            ]
        )
        near = samples.get(column, [])
        if near:
            out.append(
                _table(
                    ["side of the threshold", "score", "src", "tgt"],
                    [[side, f"{score:.2f}", s, t] for side, score, s, t in near],
                )
            )
    head = [
        "score",
        "threshold",
        "proposed",
        "how",
        "the proposal would keep",
        "kept",
        "rejected by the shard writers",
    ]
    out.insert(2, _table(head, rows))
    if flags:
        out.insert(
            3,
            f"<p>The proposals as options: <code>{html.escape(' '.join(flags))}</code>, for "
            "<code>nmtpipe rethreshold</code> (this dataset judged again into a new one, "
            "without reading the corpus) or <code>nmtpipe prepare</code>.</p>",
        )
    return "\n".join(out)


def _score_samples(roots: list[str], quality: dict[str, Any]) -> dict[str, list[tuple]]:
    """Per score, up to EXAMPLES pairs just above its threshold (kept, from the first
    train shard's first row group) and just below it (rejected, from the first reject
    file's): what the threshold decides between."""
    found: dict[str, list[tuple]] = {}
    root = roots[0]
    _, doc = prepared.read_prepared(root)
    train = [
        f["path"] for f in doc["files"] if f.get("kind") == "pairs" and f.get("split") == "train"
    ]
    kept = _first_group(fsio.join(root, sorted(train)[0]))
    gone = (
        _first_group(fsio.join(root, doc["rejects"]["files"][0]))
        if doc["rejects"]["files"]
        else None
    )
    for column in [
        c.removeprefix(judge.PREFIX) for c in kept.column_names if c.startswith(judge.PREFIX)
    ]:
        used = thresholds.threshold_of(quality, column)
        if used is None:
            continue
        above = kept.to_pylist()
        scored = [
            (r[judge.PREFIX + column], r["src"], r["tgt"])
            for r in above
            if r[judge.PREFIX + column] is not None
        ]
        pick = sorted(
            scored, key=lambda x: abs(abs(x[0]) - used) if column == "length" else x[0] - used
        )
        rows = [("kept", *x) for x in pick[:EXAMPLES]]
        if gone is not None:
            below = [
                (dict(r["scores"] or [])[column], _text(r["src"]), _text(r["tgt"]))
                for r in gone.to_pylist()
                if r["reason"] == column
            ]
            below = sorted(below, key=lambda x: -abs(x[0]) if column == "length" else -x[0])
            rows += [("rejected", *x) for x in below[:EXAMPLES]]
        found[column] = rows
    return found


def _first_group(url: str) -> Any:
    fs, path = fsio.url_to_fs(url)
    with fs.open(path, "rb") as f:
        return pq.ParquetFile(f).read_row_group(0)


def _encoded_sections(data: encoded_dataset.EncodedDataset, stats: dict[str, Any]) -> str:
    langs = data.languages
    vocab = vocabulary.open_vocabulary(data.manifest["vocab"]["url"])
    train = data["train"] if "train" in data.splits else data[data.splits[0]]
    out = ["<h2>Encoded</h2>"]
    hists, rows, pieces = {}, [], []
    sides = zip(("src", "tgt"), (train.src_sizes, train.tgt_sizes), _sample_ids(train), strict=True)
    for side, sizes, ids in sides:
        lang = langs[side]
        counts = np.bincount(sizes)
        hists[lang] = {int(i): int(c) for i, c in enumerate(counts.tolist()) if c}
        if data.format == encoded_dataset.FAIRSEQ:
            ids = id_layout.from_fairseq(vocab.kind.layout, ids)
        unk = data.layout.unk
        unk_rate = float(np.mean(ids == unk)) if unk is not None and ids.size else 0.0
        subwords = int(sizes.sum()) - len(sizes)  # without EOS
        words = stats.get("tokens", {}).get(side, 0)
        fertility = f"{subwords / words:.2f}" if words else "-"
        rows.append(
            [
                lang,
                f"{np.mean(sizes):.1f}" if len(sizes) else "-",
                f"{100 * unk_rate:.3f}%",
                fertility,
            ]
        )
        counts = np.bincount(ids[ids >= data.layout.first_symbol])
        ranked = np.argsort(-counts, kind="stable")[:PIECES]  # ties: the smaller id first
        top = [(int(i), int(counts[i])) for i in ranked if counts[i]]
        encoder = vocab.encoder(lang)
        pieces.append([lang, "  ".join(f"{encoder.piece(i)!r} {n:,}" for i, n in top)])
    out.append(
        _table(
            [
                "language",
                "tokens per sentence (EOS included)",
                "<unk> rate",
                "fertility (subwords per T2T token)",
            ],
            rows,
        )
    )
    out.append(_figure("tokens per sentence (train split)", plots.histograms(hists, "tokens")))
    out.append("<h3>Most frequent pieces</h3>" + _table(["language", "piece and count"], pieces))
    return "\n".join(out)


def _sample_ids(split: encoded_dataset.SplitData) -> tuple[np.ndarray, np.ndarray]:
    """The source and target ids (without EOS) of the first pairs of a split, up to the
    first pair at which a side has PIECE_SAMPLE ids, read in bulk."""
    totals = np.maximum(*(np.cumsum(s, dtype=np.int64) for s in (split.src_sizes, split.tgt_sizes)))
    n = min(int(np.searchsorted(totals, PIECE_SAMPLE)) + 1, len(split))
    out = []
    for ids, sizes in zip(split.head(n), (split.src_sizes[:n], split.tgt_sizes[:n]), strict=True):
        eos = np.cumsum(sizes.astype(np.int64)) - 1  # each pair's last id
        keep = np.ones(ids.size, dtype=bool)
        keep[eos[sizes > 0]] = False
        out.append(ids[keep])
    return out[0], out[1]


WORD = 16  # the longest cell text without spaces that is kept on one line
_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222 }
table { border-collapse: collapse; margin: .5em 0 1em } td, th { border: 1px solid #ccc;
padding: 2px 6px; vertical-align: top; max-width: 420px; overflow-wrap: anywhere }
th { overflow-wrap: normal; background: #f3f3f3 } td.word { white-space: nowrap }
figure.plot { margin: 1em 0 } figure.plot svg { max-width: 100%; height: auto }
figcaption { font-weight: 600 }
"""


def build_report(url: str) -> str:
    """The report page of the prepared or encoded output, or version, at `url`."""
    kind = _kind(url)
    data = None
    if kind == prepared.KIND:
        roots = [fsio.canonical_url(url)]
    elif kind in (encoded_dataset.KIND, versions.KIND):
        data = encoded_dataset.open_dataset(url, verify="size")
        sources = data.manifest["prepared"]
        roots = [p["url"] for p in (sources if isinstance(sources, list) else [sources])]
    else:
        raise InputError(f"{url} is a {kind!r} output; report reads prepare, encode and versions")
    stats, options = _prepared_stats(roots)
    langs = options["languages"]
    title = f"{langs['src']}–{langs['tgt']} dataset: {url}"
    summary = (
        f"<p>{stats.get('pairs_read', 0):,} pairs read, {stats.get('pairs_kept', 0):,} kept, "
        f"{stats.get('pairs_rejected', 0):,} rejected. Written "
        f"{manifest.created_stamp()}.</p>"
    )
    # The thresholds that judged: the options', or those its trusted pairs set.
    quality = thresholds.in_force(options.get("quality", {}), stats.get("calibrated", {}))
    options = {**options, "quality": quality}
    samples = _score_samples(roots, quality) if stats.get("scores") else {}
    body = _prepared_sections(stats, options, _examples(roots), samples)
    if data is not None:
        body += _encoded_sections(data, stats)
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>{summary}{body}</body></html>\n"
    )


def write_report(url: str, output: str | None = None) -> str:
    """Write the report of `url` (to `output`, default `url/report.html`; a version's
    into its folder) atomically; its URL."""
    where = output
    if where is None:
        folder = url
        if versions.is_version(url):
            root, number = versions.locate(url)
            folder = versions.version_url(root, number)
        where = fsio.join(fsio.canonical_url(folder), REPORT)
    fsio.write_bytes(where, build_report(url).encode())
    return where
