"""Roots as an nmtpipe before manifests for training and decoding left them, made from
roots of today by hand: what that code wrote, as it wrote it (its records' formulas and
formats are copied here from it, not taken from `pipelines/workflow/legacy.py`).

- `nmtpipe run`: `{root}/workflow/{step}.json` held `{"fingerprint": F}`, F the sha256 of
  the canonical JSON of `{"step", "options", "input"}`: the step's typed options less
  the paths the workflow wires (decode: plus `evaluate`, each set as a mapping), and
  train's encode fingerprint or, for decode, train's record.
- `nmtpipe refresh --train`: `models/{vocab}/version.json` held `{"version": N}`.
- Neither committed checkpoints or translations by a manifest, and training's summary
  had no `data_fingerprint`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from nmtpipe.pipelines.cli.config_file import load_config
from nmtpipe.transforms.storage import manifest

_WIRED = {"train": ("data", "save_dir"), "decode": ("checkpoint", "output")}


def _uncommit(folder: Path) -> None:
    (folder / "manifest.json").unlink()


def _old_summary(save_dir: Path) -> None:
    summary = json.loads((save_dir / "train_summary.json").read_text())
    summary.pop("data_fingerprint", None)
    (save_dir / "train_summary.json").write_text(json.dumps(summary, indent=2) + "\n")


def _options(config, step: str) -> dict:
    typed = dataclasses.asdict(getattr(config, step))
    return {k: v for k, v in typed.items() if k not in _WIRED[step]}


def old_run_root(config_path: Path, trained_with: Path | None = None) -> Path:
    """The root of the run config at `config_path` as the older nmtpipe left it when it
    had finished with the config at `trained_with` (default: the same)."""
    config = load_config(str(config_path))
    recorded = load_config(str(trained_with or config_path))
    root = Path(config.root)
    for folder in [root / "checkpoints", root / "decoded"]:
        _uncommit(folder)
    for extra in config.evaluate:
        _uncommit(root / "decoded" / extra.name)
    _old_summary(root / "checkpoints")
    encoded = json.loads((root / "encoded" / "manifest.json").read_text())["fingerprint"]
    train = manifest.fingerprint(
        {"step": "train", "options": _options(recorded, "train"), "input": encoded}
    )
    options = _options(recorded, "decode")
    options["evaluate"] = [dataclasses.asdict(s) for s in recorded.evaluate]
    decode = manifest.fingerprint({"step": "decode", "options": options, "input": train})
    (root / "workflow").mkdir()
    for step, fingerprint in (("train", train), ("decode", decode)):
        (root / "workflow" / f"{step}.json").write_text(json.dumps({"fingerprint": fingerprint}))
    return root


def old_refresh_model(save_dir: Path, version: int) -> None:
    """A refresh root's model as the older nmtpipe left it, trained on `version`; its
    translations as it left them."""
    _uncommit(save_dir)
    _old_summary(save_dir)
    (save_dir / "version.json").write_text(json.dumps({"version": version}))
    for translations in (save_dir.parents[1] / "translations").iterdir():
        _uncommit(translations)
