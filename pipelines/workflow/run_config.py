"""A checked workflow config: the storage root, each step's typed config, Beam options.

`nmtpipe run` and `nmtpipe refresh` read the same YAML (the command line's loader,
`pipelines/cli/config_file.py`, checks it against each step's options). The workflow
connects the steps under the root:

    {root}/prepared → {root}/vocab → {root}/encoded → {root}/checkpoints → {root}/decoded
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import Any

from nmtpipe.pipelines.workflow.encode import EncodeConfig
from nmtpipe.pipelines.workflow.prepare_plan import PrepareConfig
from nmtpipe.pipelines.workflow.vocab import VocabConfig
from nmtpipe.trainers.generate.decode_config import DecodeConfig
from nmtpipe.trainers.runtime.run_files import BEST
from nmtpipe.trainers.train.train_config import TrainConfig
from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.storage import fsio

# The sections of a config: each step's options, read into its command's typed config.
STEPS = ("prepare", "vocab", "encode", "train", "decode")
# What each step reads and writes under the root: set by the workflow, never by a config.
WIRING: dict[str, dict[str, str]] = {
    "prepare": {"output": "prepared"},
    "vocab": {"prepared": "prepared", "output": "vocab"},
    "encode": {"prepared": "prepared", "vocab": "vocab", "output": "encoded"},
    "train": {"data": "encoded", "save_dir": "checkpoints"},
    "decode": {"checkpoint": f"checkpoints/{BEST}", "output": "decoded"},
}


@dataclass(frozen=True)
class EvalSet:
    """Another test set `nmtpipe run` translates and scores after the test split, with
    the decode step's options, into `{root}/decoded/{name}/`."""

    name: str
    inputs: tuple[str, ...]
    references: tuple[str, ...] = ()


@dataclass(frozen=True)
class RefreshSettings:
    """The `refresh:` section of a config: how `nmtpipe refresh` decides and keeps."""

    drift_threshold: float = 0.05  # rebuild the vocabulary past this share of unseen tokens
    keep_versions: int = 10  # versions kept by retention (0: all)
    checksum: bool = False  # identify inputs by sha256 of their bytes, not size and version
    train_updates: int | None = None  # with --train: updates added per new version
    # local runners: work up to this size in this process (None: the one threshold,
    # pipelines/beam/options.py's IN_PROCESS_BYTES)
    in_process_bytes: int | None = None

    @classmethod
    def types(cls) -> dict[str, type]:
        """Each setting's type (`int | None`: int)."""
        return {
            key: next(t for t in typing.get_args(hint) or (hint,) if t is not type(None))
            for key, hint in typing.get_type_hints(cls).items()
        }

    @classmethod
    def checked(cls, section: Any, url: str) -> RefreshSettings:
        """The section as written, checked; each error names the key."""
        section = section or {}
        if not isinstance(section, dict):
            raise ConfigError(f"{url}: refresh is a mapping of its settings")
        types = cls.types()
        for key, value in section.items():
            if key not in types:
                raise ConfigError(
                    f"{url}: refresh.{key}: not a refresh setting; known: {', '.join(types)}"
                )
            kind = types[key]
            numeric = kind is float and isinstance(value, int)
            if isinstance(value, bool) != (kind is bool) or not (
                isinstance(value, kind) or numeric
            ):
                raise ConfigError(f"{url}: refresh.{key}: wants a {kind.__name__}, not {value!r}")
            if kind is not bool and value < 0:
                raise ConfigError(f"{url}: refresh.{key}: must not be negative")
        return cls(**section)


@dataclass(frozen=True)
class RunConfig:
    """A checked workflow config; each step's config is wired to its place under `root`."""

    root: str
    prepare: PrepareConfig
    vocab: VocabConfig
    encode: EncodeConfig
    train: TrainConfig
    decode: DecodeConfig
    beam: tuple[str, ...] = ()  # Beam pipeline options of the Beam steps
    nproc: dict[str, int] = field(default_factory=dict)  # processes of the torch steps
    refresh: RefreshSettings = RefreshSettings()  # `nmtpipe refresh`'s settings
    evaluate: tuple[EvalSet, ...] = ()  # more test sets for the decode step

    def url(self, rel: str) -> str:
        return fsio.join(self.root, rel)

    def decoded(self, name: str | None = None) -> str:
        """Where the test split's translations go, or those of the extra set `name`."""
        return self.url(WIRING["decode"]["output"] + (f"/{name}" if name else ""))


def wiring(root: str, step: str) -> dict[str, str]:
    """A step's paths under `root`, by option name (`output`, `prepared`, ...)."""
    return {dest: fsio.join(root, rel) for dest, rel in WIRING[step].items()}
