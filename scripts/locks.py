"""Whether the lock files are in step with requirements*.txt (`python -m scripts.locks`).

Each requirements file has a lock made from it by `make lock`: every pin of the file (and of
the files it includes with `-r`) must be in its lock at the same version, every entry of a lock
must carry sha256 hashes, and a package in two locks must be locked at the same versions there.
A lock may hold a package twice, at two versions for two sets of platforms (its markers), since
it is resolved for every platform. Standard library only: `make venv` runs it before any venv.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Each requirements file and the lock `make lock` compiles from it, runtime first.
LOCKS = {
    "requirements.txt": "requirements.lock",
    "requirements-demo.txt": "requirements-demo.lock",
    "requirements-dev.txt": "requirements-dev.lock",
}
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([^\s;\\]+)")
_HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}\b")


@dataclass(frozen=True)
class Locked:
    """One entry of a lock file."""

    version: str
    hashes: int


def canonical(name: str) -> str:
    """A distribution name as the index compares it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _statements(text: str) -> list[str]:
    """The lines of a requirements file, continuations joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", text)
    lines = (line.split(" #", 1)[0].strip() for line in joined.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def pins(path: Path) -> dict[str, str]:
    """{name: version} of every `name==version` in `path` and the files it includes."""
    found: dict[str, str] = {}
    for line in _statements(path.read_text()):
        if line.startswith(("-r ", "--requirement ")):
            found.update(pins(path.parent / line.split(None, 1)[1]))
        elif line.startswith("-"):
            continue
        elif match := _PIN.match(line):
            found[canonical(match[1])] = match[2]
        else:
            found[canonical(re.split(r"[\s\[<>=!~;]", line, maxsplit=1)[0])] = "(not pinned)"
    return found


def locked(path: Path) -> dict[str, list[Locked]]:
    """{name: its entries} of a lock file; an unpinned entry has version ''."""
    entries: dict[str, list[Locked]] = {}
    for line in _statements(path.read_text()):
        if line.startswith("-"):
            continue
        match = _PIN.match(line)
        name = canonical(match[1] if match else re.split(r"[\s\[<>=!~;]", line, maxsplit=1)[0])
        entry = Locked(match[2] if match else "", len(_HASH.findall(line)))
        entries.setdefault(name, []).append(entry)
    return entries


def _versions(entries: list[Locked]) -> str:
    """The versions of a package's entries, for comparing and printing."""
    return ", ".join(sorted(entry.version or "no version" for entry in entries))


def problems(root: Path = ROOT) -> list[str]:
    """Every way in which the lock files under `root` disagree with the requirements files."""
    found: list[str] = []
    seen: dict[str, tuple[str, str]] = {}
    for source, lock in LOCKS.items():
        if not (root / lock).exists():
            found.append(f"{lock} is missing")
            continue
        entries = locked(root / lock)
        for name, version in sorted(pins(root / source).items()):
            have = entries.get(name, [])
            if version not in {entry.version for entry in have}:
                got = f"locks {_versions(have)}" if have else "lacks it"
                found.append(f"{source} pins {name}=={version} but {lock} {got}")
        for name, have in sorted(entries.items()):
            if any(not entry.version or entry.hashes == 0 for entry in have):
                found.append(f"{lock}: {name} is not pinned with == and sha256 hashes")
            first = seen.setdefault(name, (_versions(have), lock))
            if first[0] != _versions(have):
                found.append(f"{name} is {first[0]} in {first[1]} but {_versions(have)} in {lock}")
    return found


def main() -> int:
    """Print every problem and exit 1, or exit 0 quietly when the locks are in step."""
    found = problems()
    for line in found:
        print(f"locks: {line}", file=sys.stderr)
    if found:
        print("locks: run `make lock` to bring the lock files in step", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
