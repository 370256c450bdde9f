"""Pair scores by models the user brings (the seed models of `nmtpipe score`), not learned
by `prepare`: dcce. May import the rest of quality, storage and errors; never torch."""
