"""Beam's job server for `scripts/local-cluster`: which one runs, and where it came from.

First as Beam itself gets one: the shaded job-server jar of the submitting Beam version
(`beam-runners-flink-1.19-job-server`, `beam-runners-spark-3-job-server`), downloaded
from Maven Central into the cache. Where that is refused (some mirrors do), one
assembled from Beam's published runner libraries by their Maven coordinates
(`ASSEMBLIES`): a pom written from them, resolved once by `mvn dependency:copy-dependencies`
into the cache, and run as `java -cp 'lib/*' <driver class>`. Nothing of Beam's is
compiled or kept in the repository.

Either way the driver runs under `JobServerLauncher.java`, which tells it to send none
of its libraries with a job: the cluster has them on its own class path (`lacking`), put
there once when it starts.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from cluster_procs import ClusterError

# The engine lines the job servers are built for: Beam's Flink runner is published per
# Flink minor version, and 1.19 is the one whose runner library this project's Maven
# mirror serves; Spark's runner is `spark-3`, built against Spark 3.5.
FLINK_LINE, SPARK_LINE = "1.19", "3.5"
SHADED_ARTIFACT = {
    "flink": f"beam-runners-flink-{FLINK_LINE}-job-server",
    "spark": "beam-runners-spark-3-job-server",
}
DRIVER = {
    "flink": "org.apache.beam.runners.flink.FlinkJobServerDriver",
    "spark": "org.apache.beam.runners.spark.SparkJobServerDriver",
}
MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2"  # where Beam's SDK fetches its jars
# The newest maven-dependency-plugin that Maven Central and the project's mirror serve.
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
# Newer job services (2.66-2.70) were refused by the mirror; 2.65's runs 2.70's runners.
JOB_SERVICE = "org.apache.beam:beam-runners-java-job-service:2.65.0"


@dataclass(frozen=True)
class Assembly:
    """A job server made of published artifacts: Beam's runner library, the job service
    around it, and what the runner leaves "provided" (Spark), by Maven coordinates."""

    coordinates: tuple[str, ...]
    engine: str  # the artifact in lib/ whose version is the engine's the runner was built for

    @property
    def name(self) -> str:
        """The cache folder: the runner and a digest of every coordinate."""
        _, artifact, version = self.coordinates[0].split(":")
        digest = hashlib.sha256("\n".join(self.coordinates).encode()).hexdigest()[:8]
        return f"{artifact}-{version}-{digest}"

    def pom(self) -> str:
        """A pom that depends on the coordinates, for `mvn dependency:copy-dependencies`."""
        deps = []
        for coordinate in self.coordinates:
            group, artifact, version = (escape(part) for part in coordinate.split(":"))
            deps.append(
                f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
                f"<version>{version}</version></dependency>"
            )
        return (
            '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
            "  <!-- Written by scripts/local-cluster: Beam's job server from published "
            "artifacts. -->\n"
            "  <modelVersion>4.0.0</modelVersion>\n"
            f"  <groupId>local.nmtpipe</groupId><artifactId>{escape(self.name)}</artifactId>"
            "<version>1</version>\n"
            "  <packaging>pom</packaging>\n"
            "  <dependencies>\n" + "\n".join(deps) + "\n  </dependencies>\n</project>\n"
        )


# The tested combination (docs/guides/scale.md; CI runs tests/clusters on it): the Python
# SDK apache-beam 2.77.0 submitting to these job servers; Flink 1.19.0 and Spark 3.5.6
# clusters, the versions the runners resolve to (local-cluster runs the job server's own).
ASSEMBLIES = {
    # The runner brings slf4j's API but no binding: without one the job server logs nothing.
    "flink": Assembly(
        (
            "org.apache.beam:beam-runners-flink-1.19:2.70.0",
            JOB_SERVICE,
            "org.slf4j:slf4j-simple:2.0.16",
        ),
        "flink-runtime",
    ),
    "spark": Assembly(
        (
            "org.apache.beam:beam-runners-spark-3:2.70.0",
            JOB_SERVICE,
            "org.apache.spark:spark-core_2.12:3.5.6",
            "org.apache.spark:spark-streaming_2.12:3.5.6",
        ),
        "spark-core_2.12",
    ),
}
TESTED_SDK = "2.77.0"


@dataclass(frozen=True)
class JobServer:
    """The job server that runs: a jar, or a folder of jars; the engine version it runs
    (None where it cannot be read); and what it is and where it came from, in words."""

    path: Path
    engine: str | None
    source: str

    @property
    def classpath(self) -> str:
        return str(self.path) if self.path.is_file() else f"{self.path}/*"

    @property
    def jars(self) -> list[Path]:
        """The jars of its class path, in the order `java -cp` reads them."""
        return [self.path] if self.path.is_file() else sorted(self.path.glob("*.jar"))


# A library jar counts as the cluster's when the cluster holds all of its classes but
# this share: Maven's flink-runtime has one class (a shell tool's) that flink-dist leaves
# to bin/; a newer version of a library Flink bundles (commons-lang3: 90 of 414) does not.
PROVIDED_SHARE = 0.99
SLF4J = "org/slf4j/"  # the cluster logs through its own SLF4J and binding


def _classes(jar: Path) -> set[str]:
    """The classes a jar holds (multi-release copies and module descriptors left out)."""
    with zipfile.ZipFile(jar) as zf:
        return {
            name
            for name in zf.namelist()
            if name.endswith(".class")
            and not name.startswith("META-INF/")
            and not name.endswith("module-info.class")
        }


def lacking(server: JobServer, cluster_jars: list[Path]) -> list[Path]:
    """The job server's jars whose classes the cluster (`cluster_jars`, its lib/) lacks:
    what a job would otherwise carry to it each time (`scripts/JobServerLauncher.java`).

    Left out: jars the cluster already holds (Flink's own modules, the libraries
    flink-dist bundles), and SLF4J's, whose 2.x API would find no provider among the
    cluster's 1.x binding and leave it without logs.
    """
    have: set[str] = set().union(*(_classes(jar) for jar in cluster_jars))
    found = []
    for jar in server.jars:
        own = _classes(jar)
        if not own or all(name.startswith(SLF4J) for name in own):
            continue
        if len(own - have) > (1 - PROVIDED_SHARE) * len(own):
            found.append(jar)
    return found


def engine_version(cluster: str, path: Path) -> str | None:
    """The Flink or Spark version a job server (a shaded jar or an assembly's folder) was
    built with: that of its flink-runtime or spark-core."""
    artifact = ASSEMBLIES[cluster].engine
    if path.is_dir():
        pattern = re.compile(rf"{re.escape(artifact)}-(\d[\w.-]*)\.jar")
        found = [m.group(1) for p in path.glob("*.jar") if (m := pattern.fullmatch(p.name))]
        return found[0] if len(found) == 1 else None
    group = "org.apache.flink" if cluster == "flink" else "org.apache.spark"
    return bundled_version(path, group, artifact)


def bundled_version(jar: Path, group: str, artifact: str) -> str | None:
    """The version of `group:artifact` shaded into `jar`, from its Maven metadata (Spark
    also writes spark-version-info.properties)."""
    names = [f"META-INF/maven/{group}/{artifact}/pom.properties"]
    if group == "org.apache.spark":
        names.insert(0, "spark-version-info.properties")
    try:
        with zipfile.ZipFile(jar) as zf:
            for name in set(names) & set(zf.namelist()):
                found = re.search(r"^version=(\S+)", zf.read(name).decode(errors="replace"), re.M)
                if found:
                    return found.group(1)
    except (OSError, zipfile.BadZipFile):
        return None
    return None


def main_class(jar: Path) -> str | None:
    try:
        with zipfile.ZipFile(jar) as zf:
            manifest = zf.read("META-INF/MANIFEST.MF").decode(errors="replace")
    except (OSError, KeyError, zipfile.BadZipFile):
        return None
    found = re.search(r"^Main-Class:\s*(\S+)", manifest, re.M)
    return found.group(1) if found else None


def given(cluster: str, path: str, env_name: str) -> JobServer:
    """The job server a setting names: a jar, or a folder of jars (an assembly's lib/)."""
    found = Path(path).expanduser().absolute()
    if not (zipfile.is_zipfile(found) or (found.is_dir() and any(found.glob("*.jar")))):
        raise ClusterError(f"{env_name}={path} is neither a jar file nor a folder of jars")
    return JobServer(found, engine_version(cluster, found), f"{env_name}={found}")


def cached(cluster: str, beam: str, cache: Path) -> JobServer | None:
    """A job server an earlier start left in the cache: Beam's shaded jar for `beam`,
    else the assembly (whatever the SDK's version: it is made of fixed versions)."""
    jar = shaded_path(cluster, beam, cache)
    if zipfile.is_zipfile(jar):
        return JobServer(jar, engine_version(cluster, jar), f"{shaded(cluster, beam)}, cached")
    folder = cache / "job-servers" / ASSEMBLIES[cluster].name
    if (folder / ".complete").exists():
        return JobServer(folder / "lib", engine_version(cluster, folder / "lib"),
                         f"{assembled(cluster)}, cached")  # fmt: skip
    return None


def shaded(cluster: str, beam: str) -> str:
    return f"Beam's shaded jar org.apache.beam:{SHADED_ARTIFACT[cluster]}:{beam}"


def assembled(cluster: str) -> str:
    return "assembled by Maven from " + " + ".join(ASSEMBLIES[cluster].coordinates)


def shaded_path(cluster: str, beam: str, cache: Path) -> Path:
    return cache / "jars" / f"{SHADED_ARTIFACT[cluster]}-{beam}.jar"


def fetch(
    cluster: str, beam: str, cache: Path, repository: str, env_name: str,
    say: Callable[[str], None],
) -> JobServer:  # fmt: skip
    """Beam's shaded jar from `repository`, else the assembly by `mvn`, into the cache.

    Fails in one line: what was refused, and what to install or set.
    """
    artifact = SHADED_ARTIFACT[cluster]
    url = f"{repository.rstrip('/')}/org/apache/beam/{artifact}/{beam}/{artifact}-{beam}.jar"
    jar = shaded_path(cluster, beam, cache)
    say(f"fetching {shaded(cluster, beam)} from {repository}")
    try:
        download(url, jar)
        return JobServer(jar, engine_version(cluster, jar), f"{shaded(cluster, beam)}, from {url}")
    except Refused as refused:
        why = f"{shaded(cluster, beam)} was refused ({refused})"
    remedy = f"or set {env_name} to a job-server jar"
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ClusterError(
            f"no {cluster} job server: {why}, and assembling one from Beam's published "
            f"runner libraries needs Maven: install it (Debian: apt-get install maven) {remedy}"
        )
    say(f"{why}; assembling one from Beam's published runner libraries with Maven")
    folder = assemble(cluster, cache, mvn, say)
    return JobServer(folder / "lib", engine_version(cluster, folder / "lib"), assembled(cluster))


class Refused(Exception):
    """A download the repository refused or that could not be had."""


def download(url: str, dest: Path) -> None:
    """`url` to `dest`, whole or not at all."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(f".{dest.name}.part")
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(part, "wb") as out:
            shutil.copyfileobj(response, out, 1 << 20)
        if not zipfile.is_zipfile(part):
            raise Refused("what it served is no jar")
        os.replace(part, dest)
    except urllib.error.HTTPError as e:
        raise Refused(f"HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError) as e:
        raise Refused(str(getattr(e, "reason", e))) from None
    finally:
        part.unlink(missing_ok=True)


def assemble(cluster: str, cache: Path, mvn: str, say: Callable[[str], None]) -> Path:
    """The assembly's folder (pom.xml, lib/ with every jar), resolved once by Maven into
    the cache; its log beside it. Fails in one line naming the coordinates and the log."""
    assembly = ASSEMBLIES[cluster]
    parent = cache / "job-servers"
    folder = parent / assembly.name
    if (folder / ".complete").exists():
        return folder
    parent.mkdir(parents=True, exist_ok=True)
    log = parent / f"{assembly.name}.mvn.log"
    say(f"resolving {' + '.join(assembly.coordinates)} into {folder} (once; a few minutes)")
    with tempfile.TemporaryDirectory(dir=parent, prefix=f".{assembly.name}-") as tmp:
        staging = Path(tmp) / "assembly"
        staging.mkdir()
        (staging / "pom.xml").write_text(assembly.pom())
        cmd = [mvn, "-B", "-q", "-f", str(staging / "pom.xml"),
               f"{DEPENDENCY_PLUGIN}:copy-dependencies", "-DincludeScope=runtime",
               f"-DoutputDirectory={staging / 'lib'}"]  # fmt: skip
        with open(log, "w") as out:
            rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
        lib = staging / "lib"
        missing = _missing(cluster, lib) if rc == 0 else f"mvn exited with code {rc}"
        if missing:
            raise ClusterError(
                f"no {cluster} job server: Maven could not assemble one from "
                f"{' + '.join(assembly.coordinates)} ({missing}; log: {log})"
            )
        (staging / ".complete").write_text(" + ".join(assembly.coordinates) + "\n")
        if folder.exists():  # a copy without its .complete mark
            shutil.rmtree(folder)
        os.replace(staging, folder)
    return folder


def _missing(cluster: str, lib: Path) -> str | None:
    """What an assembled lib/ lacks to run the driver, or None."""
    if engine_version(cluster, lib) is None:
        return f"no {ASSEMBLIES[cluster].engine} jar among what it resolved"
    driver = DRIVER[cluster].replace(".", "/") + ".class"
    for jar in sorted(lib.glob("beam-runners-*.jar")):
        with zipfile.ZipFile(jar) as zf:
            if driver in zf.namelist():
                return None
    return f"no jar holds {DRIVER[cluster]}"


def java_major() -> int | None:
    """The major version of `java` on PATH, or None where there is none."""
    java = shutil.which("java")
    if java is None:
        return None
    done = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    found = re.search(r'version "(\d+)(?:\.(\d+))?', done.stderr)
    if not found:
        return None
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major


def java_compiles() -> bool:
    """Whether `java` on PATH can run a source file (a JDK's, holding jdk.compiler)."""
    done = subprocess.run([shutil.which("java") or "java", "--list-modules"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    return any(line.startswith("jdk.compiler@") for line in done.stdout.splitlines())
