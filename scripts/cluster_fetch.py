"""What `scripts/local-cluster` fetches, once, into its cache outside the repository.

- Flink: the `apache-flink` wheel (bin/ scripts, conf/) and the `apache-flink-libraries`
  sdist (lib/ with flink-dist, bin/bash-java-utils.jar), unpacked into one FLINK_HOME.
  They are downloaded with `pip download --no-deps`, never installed: `apache-flink` pins
  an old apache-beam.
- Spark: the `pyspark` sdist, whose deps/ folder (bin/spark-class, jars/) is a SPARK_HOME.

Beam's job server comes from Maven (`cluster_job_server`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

from cluster_procs import ClusterError

# The wheel holds only scripts and configuration, the same for every Python and platform;
# these tags just let pip pick one whatever the Python that runs this script.
_WHEEL_TAGS = [
    "--only-binary=:all:",
    "--platform=manylinux2014_x86_64",
    "--python-version=3.11",
    "--implementation=cp",
    "--abi=cp311",
]


def pip_download(dest: Path, spec: str, wheel: bool) -> Path:
    """`pip download --no-deps` of one distribution into `dest`; returns the file."""
    before = set(dest.iterdir())
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir"]
    cmd += ["--disable-pip-version-check", "-q", "-d", str(dest)]
    cmd += [*_WHEEL_TAGS, spec] if wheel else ["--no-binary=:all:", spec]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    new = sorted(set(dest.iterdir()) - before)
    if result.returncode != 0 or len(new) != 1:
        last = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ClusterError(f"`pip download {spec}` failed: {last[0]}")
    return new[0]


def _write(dest: Path, rel: str, data: bytes, executable: bool) -> None:
    """`data` at `dest/rel`, refusing paths that would leave `dest`."""
    if not rel or rel.startswith("/") or ".." in Path(rel).parts:
        raise ClusterError(f"unsafe path {rel!r} in a downloaded archive")
    path = dest / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    # Wheel data may lose its exec bits; every bin/ file is a script or a launcher's jar.
    path.chmod(0o755 if executable or rel.startswith("bin/") else 0o644)


def unpack_wheel_dirs(wheel: Path, prefix: str, dirs: tuple[str, ...], dest: Path) -> None:
    """`prefix/<dir>/...` files of a wheel (a zip) into `dest/<dir>/...`."""
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            rel = info.filename.removeprefix(prefix)
            if info.is_dir() or rel == info.filename or rel.split("/")[0] not in dirs:
                continue
            _write(dest, rel, zf.read(info), bool((info.external_attr >> 16) & 0o111))


def unpack_sdist_dirs(sdist: Path, inner: str, dirs: tuple[str, ...], dest: Path) -> None:
    """`<top>/<inner>/<dir>/...` files of an sdist (a .tar.gz) into `dest/<dir>/...`."""
    with tarfile.open(sdist, "r:gz") as tf:
        for member in tf:
            below = member.name.partition("/")[2]
            rel = below.removeprefix(inner + "/")
            if not member.isfile() or rel == below or rel.split("/")[0] not in dirs:
                continue
            data = tf.extractfile(member)
            _write(dest, rel, data.read() if data else b"", bool(member.mode & 0o111))


def _fresh_home(cache: Path, name: str, build: Callable[[Path, Path], None]) -> Path:
    """`cache/name`, built once by `build(download_dir, home)` and renamed into place."""
    home = cache / name
    if (home / ".complete").exists():
        return home
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=f".{name}-") as tmp:
        staging = Path(tmp) / "home"
        downloads = Path(tmp) / "downloads"
        downloads.mkdir()
        build(downloads, staging)
        (staging / ".complete").write_text(time.strftime("%Y-%m-%dT%H:%M:%S\n"))
        if home.exists():  # a copy without its .complete mark
            shutil.rmtree(home)
        os.replace(staging, home)
    return home


def flink_home(cache: Path, version: str, say: Callable[[str], None]) -> Path:
    """A FLINK_HOME of Flink `version` (bin, conf, lib, opt, plugins) from PyPI."""

    def build(downloads: Path, home: Path) -> None:
        say(f"downloading apache-flink and apache-flink-libraries {version} from PyPI (~235 MB)")
        start = time.monotonic()
        wheel = pip_download(downloads, f"apache-flink=={version}", wheel=True)
        libs = pip_download(downloads, f"apache-flink-libraries=={version}", wheel=False)
        say(f"downloaded in {time.monotonic() - start:.0f} s; unpacking")
        unpack_wheel_dirs(wheel, "pyflink/", ("bin", "conf"), home)
        unpack_sdist_dirs(libs, "deps", ("bin", "lib", "opt", "plugins"), home)
        if not list((home / "lib").glob("flink-dist*.jar")):
            raise ClusterError(f"apache-flink-libraries {version} has no lib/flink-dist*.jar")

    return _fresh_home(cache, f"flink-{version}", build)


def spark_home(cache: Path, version: str, say: Callable[[str], None]) -> Path:
    """A SPARK_HOME of Spark `version` (bin, jars, sbin) from the pyspark sdist."""

    def build(downloads: Path, home: Path) -> None:
        say(f"downloading pyspark {version} from PyPI (~320 MB)")
        start = time.monotonic()
        sdist = pip_download(downloads, f"pyspark=={version}", wheel=False)
        say(f"downloaded in {time.monotonic() - start:.0f} s; unpacking")
        unpack_sdist_dirs(sdist, "deps", ("bin", "jars", "sbin"), home)
        if not (home / "bin" / "spark-class").exists():
            raise ClusterError(f"pyspark {version} has no deps/bin/spark-class")

    return _fresh_home(cache, f"spark-{version}", build)


# -- the submitting side -------------------------------------------------------------------


def beam_version(python: str) -> str:
    """The apache-beam version installed for `python` (the submitting side's Beam)."""
    code = "import importlib.metadata as m; print(m.version('apache-beam'))"
    try:
        result = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as e:
        raise ClusterError(f"cannot run {python} ({e}); set NMTPIPE_PYTHON") from e
    version = result.stdout.strip()
    if result.returncode != 0 or not re.fullmatch(r"\d+\.\d+\.\d+\S*", version):
        raise ClusterError(
            f"{python} has no apache-beam; set NMTPIPE_PYTHON to the python that submits "
            "pipelines (its Beam version picks the job-server jar)"
        )
    return version
