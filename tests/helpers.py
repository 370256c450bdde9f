"""What the tests share besides fixtures: the example corpus, runner options, goldens."""

from __future__ import annotations

import fcntl
import gzip
import hashlib
import json
import random
import re
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Through the checkout, not the package: tests/airflow runs where nmtpipe is not installed.
EXAMPLE = Path(__file__).resolve().parents[1] / "pipelines" / "example"
DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "golden"

# The FnApiRunner in one process: fast, and what the in-memory DirectRunner runs on.
IN_MEMORY = ["--runner=FnApiRunner", "--direct_num_workers=1", "--direct_running_mode=in_memory"]
# Worker processes: proves that every DoFn pickles and that nothing leans on shared state.
MULTI_PROCESS = [
    "--runner=FnApiRunner",
    "--direct_num_workers=2",
    "--direct_running_mode=multi_processing",
]


# Named once, at import: tests move tempfile's folder into their own tmp_path.
SDIST_LOCK = Path(tempfile.gettempdir()) / (
    "nmtpipe-sdist-" + hashlib.sha1(str(EXAMPLE.parents[1]).encode()).hexdigest()[:12] + ".lock"
)


@contextmanager
def one_sdist_build_at_a_time() -> Iterator[None]:
    """Beam's Stager builds nmtpipe's sdist in the checkout (its egg-info folder), and two
    builds at once break each other: xdist's two workers, or CI's second pytest (the Beam
    tests on the lowest Beam) beside the first. A lock of the checkout's, across
    processes, held while a test builds it."""
    with SDIST_LOCK.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        yield


def command_result(stdout: str) -> dict:
    """The result a command printed: stdout is its one JSON document."""
    return json.loads(stdout)["result"]


def train_records(save_dir: Path | str) -> list[dict]:
    """The records a training run kept beside its checkpoints (train_log.jsonl)."""
    lines = (Path(save_dir) / "train_log.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def unicode_lines(count: int, seed: int) -> list[str]:
    """Lines of characters drawn from every plane, with ASCII, spaces, a vertical tab,
    repeats, Chinese and an accented letter between: what code point tables must read
    as the regular expressions they stand for read them."""
    pool = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    rng = random.Random(seed)
    common = ["ab", "ab ", "no no ", "!!", "\t", "\v", "_", "京京", "9", "é", " "]
    return [
        "".join(
            chr(rng.choice(pool)) if rng.random() < 0.2 else rng.choice(common)
            for _ in range(rng.randrange(30))
        )
        for _ in range(count)
    ]


def example_lines(name: str, lang: str, limit: int | None = None) -> list[str]:
    """Lines of a bundled example file, undecoded line ends (CRLF) kept."""
    with gzip.open(EXAMPLE / f"{name}.{lang}.gz", "rt", encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")[:-1]
    return lines[:limit]


def write_pair(prefix: Path, src: list[str] | bytes, tgt: list[str] | bytes, langs=("en", "zh")):
    """Write PREFIX.en and PREFIX.zh; lists of lines get a final newline, bytes go as they are."""
    for lang, side in zip(langs, (src, tgt), strict=True):
        data = side if isinstance(side, bytes) else ("\n".join(side) + "\n").encode()
        Path(f"{prefix}.{lang}").write_bytes(data)
    return prefix


def prepare_example(
    folder: Path, every: int, langs: tuple[str, str] = ("en", "zh"), **options
) -> str:
    """Every `every`-th pair of the bundled example corpus, prepared in-process into
    `folder/prepared` (PrepareConfig `options` as given; `langs`: source and target);
    the output's path."""
    from nmtpipe.pipelines.workflow.prepare import run_prepare
    from nmtpipe.pipelines.workflow.prepare_plan import PrepareConfig

    corpus = write_pair(
        folder / "train",
        example_lines("tatoeba-cmn", "en")[::every],
        example_lines("tatoeba-cmn", "zh")[::every],
    )
    out = str(folder / "prepared")
    run_prepare(PrepareConfig(*langs, out, trainpref=(str(corpus),), **options), IN_MEMORY)
    return out


def train_tiny_model(folder: Path, langs: tuple[str, str] = ("en", "zh")) -> dict[str, str]:
    """A transformer_tiny trained 30 updates on 1 in 12 example pairs (a joined T2T
    vocabulary of 1,000) in the direction `langs`: its prepared and encoded data, its
    best checkpoint and folders."""
    from nmtpipe.pipelines.cli.main import main
    from nmtpipe.pipelines.workflow.encode import EncodeConfig, run_encode
    from nmtpipe.pipelines.workflow.vocab import VocabConfig, run_vocab
    from nmtpipe.trainers.runtime import run_files

    prepared = prepare_example(folder, 12, langs, valid_fraction=0.02, test_fraction=0.01)
    vocab, encoded = str(folder / "vocab"), str(folder / "encoded")
    run_vocab(VocabConfig(prepared, vocab, vocab_size=1000, joined=True), IN_MEMORY)
    run_encode(EncodeConfig(prepared, vocab, encoded), IN_MEMORY)
    save_dir = folder / "ckpt"
    code = main([
        "train", "--data", encoded, "--save-dir", str(save_dir), "--arch", "transformer_tiny",
        "--max-tokens", "1024", "--max-update", "30", "--lr", "3e-3", "--warmup-updates", "6",
        "--validate-interval-updates", "30", "--save-interval-updates", "30",
    ])  # fmt: skip
    assert code == 0
    ckpt = str(save_dir / run_files.BEST)
    return {"prepared": prepared, "vocab": vocab, "encoded": encoded, "checkpoint": ckpt,
            "save_dir": str(save_dir), "folder": str(folder)}  # fmt: skip


def encode_example(folder: Path) -> str:
    """A tiny training set: 1 in 12 example pairs prepared, a joined 1,000-entry
    vocabulary, encoded in-process under `folder`; the encoded output's path."""
    from nmtpipe.pipelines.workflow.encode import EncodeConfig, run_encode
    from nmtpipe.pipelines.workflow.vocab import VocabConfig, run_vocab

    prepared = prepare_example(folder, 12, valid_fraction=0.03)
    vocab, out = str(folder / "vocab"), str(folder / "encoded")
    run_vocab(VocabConfig(prepared, vocab, vocab_size=1000, joined=True), IN_MEMORY)
    run_encode(EncodeConfig(prepared, vocab, out), IN_MEMORY)
    return out


def golden_counts(name: str) -> Counter[str]:
    """A counts file written by shared/tools/t2t_vocab.py (T2T's own counting)."""
    unescape = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}
    counts: Counter[str] = Counter()
    with gzip.open(GOLDEN / name, "rt", encoding="utf-8", newline="\n") as f:
        for row in f.read().split("\n"):
            if row:
                token, count = row.rsplit("\t", 1)
                counts[re.sub(r"\\(.)", lambda m: unescape[m.group(1)], token)] += int(count)
    return counts


def split_ids(flat, lengths) -> list[list[int]]:
    """Concatenated lines' ids (an encoder's `encode_batch`) back into lines."""
    ends = lengths.cumsum()
    return [flat[end - n : end].tolist() for end, n in zip(ends, lengths, strict=True)]


class NotWeights:
    """A class of a user's own, which loading only weights refuses to unpickle."""


def write_foreign_checkpoint(path: Path) -> str:
    """A checkpoint nmtpipe did not write, pickling a `NotWeights`; the name torch gives
    that class."""
    import torch  # here: tests/airflow import this module without torch

    torch.save({"model": {"w": torch.ones(2)}, "args": NotWeights()}, path)
    return f"{NotWeights.__module__}.{NotWeights.__qualname__}"


SHARED_DATA = Path("/work/shared/data")
# Chinese in GB18030, CRLF line ends: a CWMT corpus as its files come.
GB18030_MEMBER = "cwmt/neu2017/NEU_cn.txt"
CWMT_PAIRS = [
    ("cwmt/casia2015/casia2015_en.txt", "cwmt/casia2015/casia2015_ch.txt"),
    ("cwmt/casict2015/casict2015_en.txt", "cwmt/casict2015/casict2015_ch.txt"),
    ("cwmt/neu2017/NEU_en.txt", GB18030_MEMBER),
    ("cwmt/datum2015/datum_en.txt", "cwmt/datum2015/datum_ch.txt"),
    *((f"cwmt/datum2017/Book{n}_en.txt", f"cwmt/datum2017/Book{n}_cn.txt") for n in range(1, 21)),
]
NC_PAIR = (
    "training-parallel-nc-v13/news-commentary-v13.zh-en.en",
    "training-parallel-nc-v13/news-commentary-v13.zh-en.zh",
)
DEV_PAIR = ("dev/newsdev2017-enzh-src.en.sgm", "dev/newsdev2017-enzh-ref.zh.sgm")


def shared_lines(name: str, lang: str) -> list[str]:
    """The lines of a corpus in /work/shared/data (`tatoeba-cmn`, `ntrex128-enzh`), line
    ends dropped."""
    text = (SHARED_DATA / name / f"{name}.{lang}").read_text(encoding="utf-8")
    return [line.removesuffix("\r") for line in text.split("\n")[:-1]]


def write_tgz(path: Path, members: dict[str, bytes]) -> Path:
    """A .tgz archive holding `members` (name → bytes), in the order given."""
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def sgml_set(lines: list[str], docids: list[str], lang: str, ref: bool) -> bytes:
    """WMT's SGML of `lines`: a `<doc>` per run of one document id, a `<seg>` per line,
    XML-escaped."""
    from xml.sax.saxutils import escape

    head = (
        f'<refset setid="newsdev2017" srclang="any" trglang="{lang}">'
        if ref
        else '<srcset setid="newsdev2017" srclang="any">'
    )
    out, doc, seg = [head], None, 0
    for line, docid in zip(lines, docids, strict=True):
        if docid != doc:
            if doc is not None:
                out += ["</p>", "</doc>"]
            sysid = "ref" if ref else "src"
            out += [f'<doc sysid="{sysid}" docid="{docid}" genre="news" origlang="en">', "<p>"]
            doc, seg = docid, 0
        seg += 1
        out.append(f'<seg id="{seg}">{escape(line, {chr(34): "&quot;"})}</seg>')
    out += ["</p>", "</doc>", "</refset>" if ref else "</srcset>"]
    return ("\n".join(out) + "\n").encode()


def t2t_enzh_archives(folder: Path, per_corpus: int = 12, gb18030_pairs: int = 300) -> dict:
    """Miniature copies of the archives T2T's translate_enzh reads, with its member
    names, made of the shared Tatoeba and NTREX-128 lines: News Commentary, every CWMT
    corpus (NEU's Chinese side in GB18030, its two sides with CRLF ends), newsdev2017 as
    SGML. Returns what each member pair holds: {(src member, tgt member): pairs}."""
    en, zh = shared_lines("tatoeba-cmn", "en"), shared_lines("tatoeba-cmn", "zh")
    at = 0

    def take(n: int) -> tuple[list[str], list[str]]:
        nonlocal at
        at += n
        return en[at - n : at], zh[at - n : at]

    folder.mkdir(parents=True, exist_ok=True)
    sizes = {}
    src, tgt = take(per_corpus * 3)
    nc = {
        name: ("\n".join(side) + "\n").encode()
        for name, side in zip(NC_PAIR, (src, tgt), strict=True)
    }
    write_tgz(folder / "training-parallel-nc-v13.tgz", nc)
    sizes[NC_PAIR] = len(src)
    members = {}
    for src_name, tgt_name in CWMT_PAIRS:
        gb = tgt_name == GB18030_MEMBER
        src, tgt = take(gb18030_pairs if gb else per_corpus)
        end = "\r\n" if gb else "\n"
        members[src_name] = (end.join(src) + end).encode()
        members[tgt_name] = (end.join(tgt) + end).encode("gb18030" if gb else "utf-8")
        sizes[(src_name, tgt_name)] = len(src)
    write_tgz(folder / "cwmt.tgz", members)
    dev_en, dev_zh = shared_lines("ntrex128-enzh", "en"), shared_lines("ntrex128-enzh", "zh")
    docids = shared_lines("ntrex128-enzh", "docid")
    n = 60
    write_tgz(
        folder / "dev.tgz",
        {
            DEV_PAIR[0]: sgml_set(dev_en[:n], docids[:n], "en", ref=False),
            DEV_PAIR[1]: sgml_set(dev_zh[:n], docids[:n], "zh", ref=True),
        },
    )
    sizes[DEV_PAIR] = n
    return sizes
