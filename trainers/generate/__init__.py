"""Translating with a checkpoint: decode, translate, their configs, scoring. May import export
(the CTranslate2 engine, when chosen), runtime, data, model of trainers, and transforms."""
