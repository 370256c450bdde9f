"""`python -m nmtpipe`: the same as the `nmtpipe` console script."""

import sys

from nmtpipe.pipelines.cli.main import main

sys.exit(main())
