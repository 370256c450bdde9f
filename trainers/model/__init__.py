"""The models: configs and presets, the Transformer with incremental decoding, beam search.
May import transforms (id layouts); nothing else of trainers."""
