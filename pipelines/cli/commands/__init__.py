"""One module per `nmtpipe` command, which main.py imports by name when it runs; no command
imports another's module. May import the rest of cli, the workflow, trainers, transforms."""
