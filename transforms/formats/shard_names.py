"""The names of the files steps write: one home for every shard-naming rule.

Sharded files are named as TFDS and Hugging Face datasets name theirs
(`train-00003-of-00008.parquet`); fairseq shards as `fairseq-preprocess` names them
(`train`, `train1`, ... with the language pair and language).
"""

from __future__ import annotations

from collections.abc import Mapping

CHARS_PATH = "counts/chars.parquet"  # a prepare output's character counts (the alphabet)


def shard_name(split: str, shard: int, num_shards: int, suffix: str) -> str:
    """`train-00003-of-00008.parquet`, the naming TFDS and HF datasets use."""
    return f"{split}-{shard:05d}-of-{num_shards:05d}{suffix}"


def pairs_path(split: str, shard: int, num_shards: int) -> str:
    """A prepared split's Parquet shard of pairs."""
    return shard_name(split, shard, num_shards, ".parquet")


def counts_path(side: str, bucket: int, buckets: int) -> str:
    """A prepared output's bucket of token counts for one side (a language, or joined)."""
    return f"counts/{shard_name(side, bucket, buckets, '.parquet')}"


def rejects_path(shard: int, num_shards: int) -> str:
    return f"rejects/{shard_name('rejects', shard, num_shards, '.parquet')}"


def arrow_path(split: str, part: int, parts: int) -> str:
    """An encoded split's Arrow shard."""
    return f"arrow/{shard_name(split, part, parts, '.arrow')}"


def fairseq_prefix(split: str, index: int, langs: Mapping[str, str]) -> str:
    """`fairseq-preprocess`'s name for the index-th file of a split: `train`, `train1`, ..."""
    return f"fairseq/{split}{index or ''}.{langs['src']}-{langs['tgt']}"
