"""LiteLLM's proxy as a peer of chatq's front door: its own venv, fakellm as its upstream.

The venv lives in `.run/` (never in requirements*.txt): built on first use from PyPI, reused
while its stamp names the same pin, rebuilt when the pin changes. `python -m bench.litellm`
builds it ahead of a run.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import requests

from scripts.localredis import free_port
from tests.procs import Proc, wait_until

ROOT = Path(__file__).resolve().parents[1]
VERSION = "1.108.7"
# 1.107.0 was a compromised release: never install it, whatever the pin is changed to.
FORBIDDEN = frozenset({"1.107.0"})
REQUIREMENT = f"litellm[proxy]=={VERSION}"
VENV = ROOT / ".run" / "litellm-venv"
STAMP = VENV / ".bench-requirement"
MODEL = "fake"
INSTALL_TIMEOUT_S = 900.0


@dataclass
class Built:
    """The outcome of making the venv: its `litellm` command, or why there is none."""

    command: Path | None
    note: str


def _install(python: str) -> None:
    subprocess.run([python, "-m", "venv", str(VENV)], check=True, timeout=120)
    pip = [
        str(VENV / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ]
    subprocess.run(
        [*pip, REQUIREMENT], check=True, timeout=INSTALL_TIMEOUT_S, capture_output=True, text=True
    )


def build(python: str = sys.executable) -> Built:
    """The proxy's venv, built (or rebuilt for a new pin) when needed; never raises."""
    if VERSION in FORBIDDEN:
        return Built(None, f"litellm {VERSION} is a forbidden release; not installed")
    command = VENV / "bin" / "litellm"
    if STAMP.exists() and STAMP.read_text() == REQUIREMENT and command.exists():
        return Built(command, f"{REQUIREMENT} (venv reused)")
    shutil.rmtree(VENV, ignore_errors=True)
    try:
        _install(python)
    except subprocess.CalledProcessError as exc:
        tail = (exc.stderr or "").strip().splitlines()[-3:]
        return Built(None, f"could not install {REQUIREMENT}: {' / '.join(tail) or exc}")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Built(None, f"could not install {REQUIREMENT}: {type(exc).__name__} {exc}")
    STAMP.write_text(REQUIREMENT)
    return Built(command, f"{REQUIREMENT} (venv built)")


def built() -> bool:
    """Whether the venv of the current pin is there already (a quick run builds nothing)."""
    return STAMP.exists() and STAMP.read_text() == REQUIREMENT


def config_text(upstream: str, upstream_key: str, master_key: str) -> str:
    """The proxy's config: one model, fakellm behind it, no retries, no telemetry."""
    return (
        "model_list:\n"
        f"  - model_name: {MODEL}\n"
        "    litellm_params:\n"
        f"      model: openai/{MODEL}\n"
        f"      api_base: {upstream}\n"
        f"      api_key: {upstream_key}\n"
        "litellm_settings:\n"
        "  telemetry: false\n"
        "  num_retries: 0\n"
        "general_settings:\n"
        f"  master_key: {master_key}\n"
    )


class LiteLLMProc(Proc):
    """The `litellm` command of the venv, logged like the other processes of a run."""

    def __init__(self, command: Path, config: Path, port: int) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATQ_", "LITELLM"))}
        # Offline: the model cost map from the package, not the network.
        env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONUNBUFFERED="1")
        super().__init__("litellm", [], env)
        self.args = [
            str(command),
            "--config",
            str(config),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--num_workers",
            "1",
        ]


@dataclass
class Proxy:
    """A running proxy: its process, base URL (no /v1) and the key clients send."""

    proc: Proc
    base: str
    key: str


def start(command: Path, upstream: str, upstream_key: str, folder: Path) -> Proxy:
    """Start the proxy with fakellm (`upstream`, its …/v1 URL) behind it; wait until it serves."""
    master_key = "sk-bench-" + secrets.token_hex(12)
    config = folder / "litellm.yaml"
    config.write_text(config_text(upstream, upstream_key, master_key))
    config.chmod(0o600)
    port = free_port()
    proc = LiteLLMProc(command, config, port).start()
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(
            lambda: requests.get(base + "/health/liveliness", timeout=2).ok, 120, "litellm proxy"
        )
    except AssertionError:
        proc.stop()
        raise
    return Proxy(proc, base, master_key)


def main() -> int:
    """Build the venv now; print what was done."""
    outcome = build()
    print(outcome.note)
    return 0 if outcome.command else 1


if __name__ == "__main__":
    sys.exit(main())
