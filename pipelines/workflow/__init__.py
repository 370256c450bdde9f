"""The driver: each step planned, reused or built and committed (one skeleton), `nmtpipe run`,
`refresh`, the reports. May import pipelines.beam, trainers, transforms; never cli."""
