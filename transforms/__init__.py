"""What data becomes: readers, normalisation, filters, tokenizers, counts, shard writers.

Pure functions first; the Beam DoFns and CombineFns around them are thin.
"""
