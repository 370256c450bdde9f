"""The `nmtpipe` command line: one module per command, the YAML config loader, logs.
May import everything; the only room that knows the argument parsers."""
