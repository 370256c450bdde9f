"""Vocabulary kinds: the protocol every kind implements (T2T subwords, SentencePiece, Hugging
Face `tokenizers`) and the registry that names them. May import the rest of vocab, text and
storage; no Beam, no torch."""
