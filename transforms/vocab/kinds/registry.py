"""The vocabulary kinds by `--model` name, fairseq's `register_bpe` table made explicit:
a new kind is its module in this folder and its `register` line here, which also gives
`nmtpipe vocab` its config's options (`with_kind_configs`)."""

from __future__ import annotations

from nmtpipe.transforms.options import nested, with_configs
from nmtpipe.transforms.vocab.kinds.base import VocabKind
from nmtpipe.transforms.vocab.kinds.hf import HfKind
from nmtpipe.transforms.vocab.kinds.spm import SpmKind
from nmtpipe.transforms.vocab.kinds.t2t import T2tKind

CLASSES: tuple[type[VocabKind], ...] = ()  # in registration order: the help's order
KINDS: dict[str, VocabKind] = {}
MODELS: tuple[str, ...] = ()  # `--model`'s choices, in this order
# what each kind may write, for the driver's pattern of the files it owns
FILE_PATTERNS: tuple[str, ...] = ()


def register(cls: type[VocabKind]) -> None:
    """Serve `cls`'s `--model` names with it. The driver's module reads the kinds when
    it is imported (`VocabConfig`, `MODELS`): a kind registers before that."""
    global CLASSES, MODELS, FILE_PATTERNS
    taken = [model for model in cls.MODELS if model in KINDS]
    taken += [cls.NAME] if cls.NAME in {c.NAME for c in CLASSES} else []
    if taken:
        raise ValueError(f"{cls.__name__}: {', '.join(taken)} already registered")
    CLASSES += (cls,)
    KINDS.update({model: cls(model) for model in cls.MODELS})
    MODELS = tuple(KINDS)
    FILE_PATTERNS = tuple(dict.fromkeys(c.FILE_PATTERN for c in CLASSES))


register(T2tKind)
register(SpmKind)
register(HfKind)


def with_kind_configs(shared: type) -> type:
    """The config class `shared` (the options every kind builds with) with a field per
    registered kind holding its config, named as the kind: the kinds' options are the
    command's own, each kind's in its help group."""
    fields = (
        (cls.NAME, cls.Config, nested(cls.Config, group=cls.group(), defaults=cls.CONFIG_DEFAULTS))
        for cls in CLASSES
    )
    return with_configs(shared, fields)


def kind_of(model: str) -> VocabKind:
    """The kind of a vocabulary's `model` (a manifest's, or `--model`)."""
    try:
        return KINDS[model]
    except KeyError:
        raise ValueError(
            f"unknown vocabulary model {model!r}; choose from {', '.join(MODELS)}"
        ) from None
