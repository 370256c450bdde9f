"""Vocabularies: token counts, samples, the T2T SubwordTextEncoder and its build, SentencePiece,
fairseq dictionaries, id layouts, the kinds (`kinds/`). May import text and storage; no Beam."""
