"""The `nmtpipe` command line: main (the commands by name), flags, the YAML config loader,
logs; each command in commands/. May import everything; the only room that knows argparse."""
