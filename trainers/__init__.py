"""Torch: the models and beam search (model/), batching and decode inputs (data/), and the
train and decode jobs (loop/). May import transforms; never pipelines, never Beam."""
