"""Torch side of nmtpipe: the Transformer, token batches, the objective, training and decoding.

Built so far: `model` (Transformer with incremental decoding), `batching` (token-based,
rank-balanced, resumable batches), `collate`, `objective` (label smoothing, schedules).
"""
