"""The driver: each step planned, cached and committed (typed configs), `nmtpipe run`,
`refresh` and the Airflow DAG. May import pipelines.beam, trainers, transforms; never cli."""
