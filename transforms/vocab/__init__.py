"""Vocabularies: token counts, samples, fairseq dictionaries, id layouts, tokenizer.json, a
committed vocabulary loaded, and the kinds (`kinds/`: T2T, SentencePiece, `tokenizers`). May
import text and storage; no Beam."""
