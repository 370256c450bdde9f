"""`python -m nmtpipe`: the same as the `nmtpipe` console script."""

import sys

from nmtpipe.pipelines.cli.main import entry

sys.exit(entry())
