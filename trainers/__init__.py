"""Torch: the jobs (train/; generate/: decode and translate; export/), what they run on
(runtime/: checkpoints, ranks, run files), batching and decode inputs (data/), the models
and beam search (model/). May import transforms; never pipelines, never Beam."""
