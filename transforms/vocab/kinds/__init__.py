"""Vocabulary kinds: the protocol (base), T2T subwords, SentencePiece and Hugging Face
`tokenizers` (each its kind and its algorithm), the registry. May import the rest of vocab,
text and storage; no Beam, no torch."""
