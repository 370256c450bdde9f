"""The driver: the steps (one protocol, whatever does their work), `nmtpipe run`'s chain,
`refresh`, the reports. May import pipelines.beam, trainers, transforms; never cli."""
