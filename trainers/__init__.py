"""Torch side of nmtpipe: shard datasets, the Transformer, DDP training and decoding.

Empty until the `encode` shards it reads exist; see the project issues for the plan.
"""
