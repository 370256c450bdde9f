"""Storage: one fsspec code path with atomic writes, retries, manifests and commits,
dataset versions, inputs and raw corpus files. Imports only transforms.errors."""
