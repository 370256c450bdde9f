"""The files steps write and read: shard names, prepared Parquet, Arrow and fairseq shards,
the encoded-dataset reader, refresh's part indexes. May import vocab, text, storage; no Beam."""
