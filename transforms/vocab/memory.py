"""Whether a vocabulary build fits this machine, checked before the work starts, with the
one setting that makes it fit named in the refusal: a build that runs out of memory an
hour in is the failure users of `spm_train` and T2T know best."""

from __future__ import annotations

from pathlib import Path

from nmtpipe.transforms.errors import ConfigError

# What the driver holds besides the build (interpreter, Arrow, the sample's tables).
BASE_BYTES = 400 << 20


def available_bytes() -> int | None:
    """The memory this process may still take: the kernel's `MemAvailable`, or less
    where a cgroup limit is nearer; None where neither can be read (not Linux)."""
    found = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)
    except OSError:
        pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = Path("/sys/fs/cgroup/memory.current").read_text().strip()
        if limit != "max":
            found.append(int(limit) - int(used))
    except (OSError, ValueError):
        pass
    return min(found) if found else None


def gigabytes(n: float) -> str:
    return f"{n / 2**30:.1f} GB"


def check_fits(what: str, need: int, unit_bytes: float, setting: str) -> None:
    """Refuse, in one line, a build of `need` bytes that this machine cannot hold: it
    names `setting` (a flag taking a count of units of `unit_bytes` each) and the largest
    value that fits."""
    have = available_bytes()
    if have is None or need + BASE_BYTES <= have:
        return
    fits = max(int((have - BASE_BYTES) / unit_bytes), 0)
    raise ConfigError(
        f"{what} needs about {gigabytes(need + BASE_BYTES)} and this machine has "
        f"{gigabytes(have)} available: set {setting} {fits:,} or less"
    )
