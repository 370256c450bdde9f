"""The files steps write and read: shard names, prepared Parquet, Arrow and fairseq mmap
shards, the encoded-dataset reader. May import vocab, text and storage; no Beam."""
