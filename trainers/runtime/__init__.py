"""What every torch job runs on: checkpoints, ranks (torch.distributed), the names of the files
jobs leave. May import trainers.model, trainers.data and transforms."""
