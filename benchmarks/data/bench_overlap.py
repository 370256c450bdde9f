"""The checks across a version's inputs (`version_exclusions`), with each part's index
kept and with every index built anew, on a refresh root's latest version.

    python benchmarks/data/bench_refresh.py --pairs 1000000 ...   # makes the root
    python benchmarks/data/bench_overlap.py benchmarks/.work/refresh-1000000/refresh-root
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from nmtpipe.pipelines.workflow.refresh.version_overlap import version_exclusions
from nmtpipe.transforms.formats.overlap_index import VersionPart, index_url
from nmtpipe.transforms.storage import versions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", help="a refresh root (its latest version is checked)")
    args = parser.parse_args()
    root = Path(args.root).resolve()
    doc = versions.read_version(str(root), versions.latest_number(str(root)))
    parts = [
        VersionPart(p["key"], str(root / p["prepared"]), str(root / f"parts/{p['key']}"))
        for p in doc["parts"]
    ]
    pairs = sum(doc["splits"].values())
    print(f"{len(parts)} parts, {pairs:,} pairs")
    version_exclusions(parts, keep_overlap=False)  # warm: imports, page cache, indexes
    with tempfile.TemporaryDirectory() as aside:
        for label in ("kept", "built", "kept"):
            if label == "built":  # move the indexes aside; put them back after
                moved = [Path(index_url(p)) for p in parts]
                for k, path in enumerate(moved):
                    path.rename(Path(aside) / str(k))
            started = time.perf_counter()
            rows = version_exclusions(parts, keep_overlap=False)
            print(f"indexes {label}: {time.perf_counter() - started:.2f} s, {len(rows)} excluded")
            if label == "built":
                for k, path in enumerate(moved):
                    (Path(aside) / str(k)).replace(path)


if __name__ == "__main__":
    main()
