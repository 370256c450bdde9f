"""What text becomes: normalisation, cleaning, filters, splits, the T2T tokenizer, statistics.
May import transforms.storage and transforms.errors; no Beam."""
