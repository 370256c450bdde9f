"""nmtpipe: raw parallel corpora to trained translation models.

The code lives in three rooms at the top of the repository, installed beneath this
package: `nmtpipe.transforms` (what data becomes), `nmtpipe.trainers` (torch) and
`nmtpipe.pipelines` (what runs where, and the command line); see ARCHITECTURE.md.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("nmtpipe")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
