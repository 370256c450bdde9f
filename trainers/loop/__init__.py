"""The jobs: training and decoding loops, checkpoints, ranks, schedule, objective, scoring,
progress, the torchrun launcher. May import trainers.model, trainers.data and transforms."""
