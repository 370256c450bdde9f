"""The `nmtpipe` command line: main, flags, the YAML config loader, logs, the display, torch
ranks' entry; each command in commands/. May import everything; the only one with argparse."""
