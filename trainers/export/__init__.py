"""Exports (Transformers' Marian, CTranslate2) and the CTranslate2 engine: the only room that
imports transformers and ctranslate2. May import runtime, data, model of trainers, transforms."""
