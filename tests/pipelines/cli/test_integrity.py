"""Fault injection: a byte flipped in any committed file is refused by the command that
reads it, in one line that names the file (never a traceback or an "internal error")."""

from __future__ import annotations

from pathlib import Path

import pytest

from nmtpipe.pipelines.cli.main import main
from tests.helpers import IN_MEMORY, prepare_example


@pytest.fixture(scope="module")
def chain(tmp_path_factory) -> dict[str, Path]:
    """A small prepare → vocab → encode → train chain, committed."""
    folder = tmp_path_factory.mktemp("integrity")
    prepared = Path(prepare_example(folder, 16, valid_fraction=0.05, test_fraction=0.05))
    vocab, encoded, ckpt = folder / "vocab", folder / "encoded", folder / "ckpt"
    vocab_args = ["--vocab-size", "300", "--joined", *IN_MEMORY]
    assert main(["vocab", "--prepared", str(prepared), "--output", str(vocab), *vocab_args]) == 0
    encode = ["encode", "--prepared", str(prepared), "--vocab", str(vocab), *IN_MEMORY]
    assert main([*encode, "--output", str(encoded)]) == 0
    train = ["train", "--data", str(encoded), "--save-dir", str(ckpt), "--max-update", "2",
             "--max-tokens", "1024", "--warmup-updates", "1"]  # fmt: skip
    assert main(train) == 0
    return {"prepared": prepared, "vocab": vocab, "encoded": encoded, "ckpt": ckpt}


def _consumer(chain: dict[str, Path], kind: str, out: Path) -> list[str]:
    """The command that reads a committed file of `kind`."""
    encode = ["encode", "--prepared", str(chain["prepared"]), "--vocab", str(chain["vocab"]),
              "--output", str(out), *IN_MEMORY]  # fmt: skip
    train = ["train", "--data", str(chain["encoded"]), "--save-dir", str(out),
             "--max-update", "1", "--max-tokens", "1024"]  # fmt: skip
    return {
        "prepared": encode,
        "counts": [
            "vocab",
            "--prepared",
            str(chain["prepared"]),
            "--output",
            str(out),
            "--vocab-size",
            "300",
            "--joined",
            *IN_MEMORY,
        ],
        "vocab": encode,
        "dict": encode,
        "arrow": [*train, "--format", "arrow"],
        "fairseq": [*train, "--format", "fairseq"],
        "checkpoint": [
            "decode",
            "--checkpoint",
            str(chain["ckpt"] / "checkpoint_last.pt"),
            "--output",
            str(out),
            "--max-len-b",
            "2",
        ],
    }[kind]


FILES = {  # kind: a glob under its output folder
    "prepared": ("prepared", "train-*.parquet"),
    "counts": ("prepared", "counts/joined-*.parquet"),
    "vocab": ("vocab", "vocab.subwords"),
    "dict": ("vocab", "dict.*.txt"),
    "arrow": ("encoded", "arrow/train-*.arrow"),
    "fairseq": ("encoded", "fairseq/train.en-zh.zh.*"),  # the .bin and the .idx
    "checkpoint": ("ckpt", "checkpoint_last.pt"),
}


@pytest.mark.parametrize("where", [0.02, 0.5, 0.97])
@pytest.mark.parametrize("kind", list(FILES))
def test_a_flipped_byte_is_refused_with_the_file_named(chain, tmp_path, capsys, kind, where):
    folder, pattern = FILES[kind]
    for path in sorted(chain[folder].glob(pattern)):
        pristine = path.read_bytes()
        damaged = bytearray(pristine)
        damaged[min(int(len(damaged) * where), len(damaged) - 1)] ^= 0x10
        path.write_bytes(bytes(damaged))
        try:
            capsys.readouterr()
            code = main(_consumer(chain, kind, tmp_path / f"out-{path.name}"))
            err = capsys.readouterr().err.strip().splitlines()
        finally:
            path.write_bytes(pristine)
        assert code == 1, err
        assert f"{path} is corrupted: its sha256 is" in err[-1], err
        assert "internal error" not in err[-1] and not any("Traceback" in e for e in err)
        assert not (tmp_path / f"out-{path.name}" / "manifest.json").exists()
