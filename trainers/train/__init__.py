"""Training: the job, its config, objective, schedule, progress, validation BLEU, averaging, the
launcher of train and decode jobs. May import the other rooms of trainers, and transforms."""
