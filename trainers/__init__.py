"""Torch side of nmtpipe: the Transformer, token batches, the objective, training.

`model`/`model_config` (Transformer with incremental decoding, presets), `batching`
(token-based, rank-balanced, resumable batches), `collate`, `objective` (fairseq's label
smoothing), `schedule` (warm-up schedules), `checkpoint`, `progress`, `train` (the DDP
loop of one rank). Decoding is still to come.
"""
