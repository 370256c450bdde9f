"""Pair quality: scores that tell a translation from a non-translation (misaligned,
partial and meaningless pairs, near-duplicates), each scorer a registered kind
(`registry.py`), with thresholds. May import text and storage; no Beam."""
