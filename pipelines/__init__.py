"""What runs where: the Beam pipeline graphs, the driver steps and the `nmtpipe` CLI."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("nmtpipe")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
