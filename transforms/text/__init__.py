"""What text becomes: normalisation, cleaning, filters, language identification (langid/),
splits, the T2T tokenizer, statistics. May import transforms.storage and errors; no Beam."""
