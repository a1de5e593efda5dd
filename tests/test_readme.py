"""The examples of the README and of the docs run as written, each on its own.

Examples: every fenced block of README.md and docs/*.md is either run or visibly not. A block
fenced ```sh or ```python in the README's "Using it" section or on a page of EXAMPLE_PAGES is
run exactly as written against a running stack, with `URL` and `KEY` exported as `make up`
tells the reader: each block in a bash (or an interpreter) of its own, in a folder of its own,
so that none leans on another. A block that is not meant to run (an install step, `make up`,
Compose, a transcript with its output, a JSON body) is fenced ```console, ```text or ```json
instead, and is only shown (as the Quick start's `make up` is).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from chatq.config.fields import declared
from chatq.config.settings import Settings
from scripts.localredis import free_port
from tests.conftest import Stack
from tests.procs import ALICE_KEY

pytestmark = pytest.mark.long

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
EXAMPLE_PAGES = ("clients.md",)
RUN = ("sh", "python")
SHOWN = ("console", "text", "json")
FENCE = re.compile(r"^```([A-Za-z]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
ANY_FENCE = re.compile(r"^ *```([A-Za-z]*)\n.*?^ *```$", re.MULTILINE | re.DOTALL)
ERROR_OBJECT = re.compile(r'"error"\s*:\s*\{')
WORDS = re.compile(r"\S+")
RECIPES = "## Put it in front of a real upstream"


def test_the_readme_is_a_front_page() -> None:
    assert len(README.read_text().splitlines()) <= 300


def test_every_block_of_the_readme_and_docs_is_either_run_or_visibly_shown_only() -> None:
    for path in [README, *sorted(DOCS.glob("*.md"))]:
        langs = ANY_FENCE.findall(path.read_text())
        assert [lang for lang in langs if lang not in RUN + SHOWN] == [], path.name


def section(text: str, heading: str) -> str:
    """The lines under `heading` (a `## ` line) up to the next heading of its level."""
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def recipes() -> dict[str, dict[str, str]]:
    """The README's recipes for real upstreams: each `### ` title and the variables it exports."""
    found = {}
    for part in re.split(r"^(?=### )", section(README.read_text(), RECIPES), flags=re.MULTILINE):
        blocks = [m.group(2) for m in FENCE.finditer(part) if m.group(1) == "console"]
        if part.startswith("### ") and blocks:
            title = part.splitlines()[0].removeprefix("### ")
            found[title] = dict(re.findall(r"^export (CHATQ_[A-Z_]+)=(\S+)$", blocks[0], re.M))
    return found


def test_each_recipe_sets_the_upstream_and_the_model_with_settings_chatq_reads() -> None:
    names = {spec.env for _, spec in declared(Settings)}
    found = recipes()
    assert len(found) == 5, sorted(found)
    urls = {recipe["CHATQ_UPSTREAM_URLS"] for recipe in found.values()}
    assert urls == {
        "https://api.openai.com/v1",
        "http://localhost:8000/v1",
        "http://localhost:11434/v1",
        "http://localhost:8080/v1",
        "http://localhost:4000/v1",
    }
    for title, recipe in found.items():
        assert set(recipe) <= names, title
        assert "CHATQ_DEFAULT_MODEL" in recipe, title


@dataclass
class Ran:
    """What a block printed (stdout and stderr) and its exit status."""

    output: str
    status: str


@dataclass
class Block:
    """One fenced block of the README: the subsection it is in, its fence and its text."""

    heading: str
    lang: str
    code: str


def blocks_of(text: str, level: str) -> list[Block]:
    """The fenced blocks of `text`, each with the `level` heading it is under."""
    blocks = []
    for part in re.split(f"^(?={level} )", text, flags=re.MULTILINE):
        heading = part.splitlines()[0].removeprefix(f"{level} ").strip()
        blocks += [Block(heading, m.group(1), m.group(2)) for m in FENCE.finditer(part)]
    return blocks


def example_blocks() -> list[Block]:
    """The README's "Using it" blocks, then every block of the example pages, in order."""
    blocks = blocks_of(section(README.read_text(), "## Using it"), "##")
    for page in EXAMPLE_PAGES:
        blocks += blocks_of((DOCS / page).read_text(), "##")
    return blocks


def test_the_examples_include_code_that_runs() -> None:
    assert {b.lang for b in example_blocks()} >= set(RUN)


# What each subsection's examples must print, beyond running cleanly.
def _front_page_curl(out: str) -> None:
    assert re.search(r'"status"\s*:\s*"completed"', out), out
    assert re.search(r'"object"\s*:\s*"chat\.completion"', out), out


def _front_page_sdk(out: str) -> None:
    assert out.strip() == "Hello from the SDK", out


def _curl_job(out: str) -> None:
    assert len(re.findall(r'"status"\s*:\s*"completed"', out)) >= 2, out
    assert re.search(r'"object"\s*:\s*"chat\.completion"', out), out


def _events_cursor(out: str) -> None:
    assert len(WORDS.findall(out.strip().splitlines()[-1])) == 12, out


def _sse(out: str) -> None:
    assert len(re.findall(r"^id: ", out, re.MULTILINE)) >= 2, out
    assert re.search(r'"type"\s*:\s*"end"', out), out


def _sdk(out: str) -> None:
    lines = out.strip().splitlines()
    assert lines[0] == "Hello from the SDK", out
    assert len(WORDS.findall(lines[1])) == 6, out


def _webhooks(out: str) -> None:
    assert re.search(r"^verified \{", out, re.MULTILINE), out
    assert re.search(r'"status"\s*:\s*"delivered"', out), out
    assert re.search(r'"replay_of"\s*:\s*"dlv_', out), out


def _background_sdk(out: str) -> None:
    lines = out.strip().splitlines()
    assert lines[0] == "queued", out
    assert lines[1].startswith("completed ") and len(WORDS.findall(lines[1])) == 9, out
    assert lines[2].split()[-1] == "response.completed", out
    assert lines[3:] == ["And then?", "cancelled"], out


def _background_curl(out: str) -> None:
    assert re.match(r"completed( \S+){8}\n", out), out
    assert re.findall(r"^id: (\d+)", out, re.MULTILINE)[0] == "13", out
    assert re.search(r"^event: response\.completed$", out, re.MULTILINE), out


def _batch_curl(out: str) -> None:
    assert "completed {'total': 3, 'completed': 3, 'failed': 0}" in out, out
    assert sorted(re.findall(r'"custom_id":"(q\d)"', out)) == ["q1", "q2", "q3"], out


def _batch_sdk(out: str) -> None:
    assert sorted(out.strip().splitlines()) == [f"q{i} Question {i}" for i in range(3)], out


def _batch_responses(out: str) -> None:
    assert sorted(out.strip().splitlines()) == [f"r{i} completed Topic {i}" for i in range(3)], out


EXPECT = {
    "Using it (sh)": _front_page_curl,
    "Using it (python)": _front_page_sdk,
    "curl: submit, long-poll, result": _curl_job,
    "curl: the answer as it grows (events cursor)": _events_cursor,
    "curl -N: Server-Sent Events": _sse,
    "The OpenAI Python SDK": _sdk,
    "curl with webhooks: be told when a job ends": _webhooks,
    "Background responses with the OpenAI SDK": _background_sdk,
    "curl: a background response, long-polled and resumed": _background_curl,
    "Batch: a file of requests, with curl": _batch_curl,
    "Batch: the OpenAI Python SDK": _batch_sdk,
    "Batch: Responses requests, with the SDK": _batch_responses,
}


def _env(stack: Stack) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATQ_")}
    return {**env, "URL": stack.url, "KEY": ALICE_KEY}


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def _run_shell_block(block: Block, env: dict[str, str], cwd: Path, timeout_s: float = 120) -> Ran:
    """Run one block in a bash of its own, `set -u` first: an undefined variable (one that
    another block set) is an error, not an empty string."""
    done = subprocess.run(
        ["bash", "-c", f"set -u\n{block.code}"],
        cwd=cwd,
        env=env,
        timeout=timeout_s,
        capture_output=True,
        text=True,
        check=False,
    )
    return Ran(done.stdout + done.stderr, str(done.returncode))


def _run_python_block(block: Block, env: dict[str, str], cwd: Path) -> Ran:
    """Run one block in an interpreter of its own: this venv's, as `.venv/bin/python` is."""
    done = subprocess.run(
        [sys.executable, "-c", block.code],
        cwd=cwd,
        env=env,
        timeout=120,
        capture_output=True,
        text=True,
        check=False,
    )
    return Ran(done.stdout + done.stderr, str(done.returncode))


def _check(block: Block, ran: Ran) -> None:
    where = f"{block.heading} ({block.lang}), exit status {ran.status}:\n{ran.output}"
    assert ran.status == "0", where
    assert "Traceback" not in ran.output and not ERROR_OBJECT.search(ran.output), where
    expect = EXPECT.get(f"{block.heading} ({block.lang})") or EXPECT.get(block.heading)
    (expect or (lambda _: None))(ran.output)


def test_the_examples_run_as_written_each_on_its_own(stack: Stack, tmp_path: Path) -> None:
    blocks = [b for b in example_blocks() if b.lang in RUN]
    missing = {h.removesuffix(" (sh)").removesuffix(" (python)") for h in EXPECT} - {
        b.heading for b in blocks
    }
    assert not missing, f"sections gone or renamed: {sorted(missing)}"
    env = _env(stack)

    def run(i: int, block: Block) -> Ran:
        cwd = tmp_path / str(i)
        cwd.mkdir()
        runner = _run_shell_block if block.lang == "sh" else _run_python_block
        return runner(block, env, cwd)

    # Side by side, as readers on one server would be: each example waits on its jobs.
    with ThreadPoolExecutor(max_workers=4) as pool:
        ran = list(pool.map(run, range(len(blocks)), blocks))
    for block, result in zip(blocks, ran, strict=True):
        _check(block, result)


@pytest.mark.parametrize(
    "code,fails",
    [
        ('echo "$KEY_THAT_IS_NOT_SET"', True),
        ('curl -s -H "Authorization: Bearer nope" "$URL/v1/jobs/job_x"', True),
        ('curl -s -H "Authorization: Bearer $KEY" "$URL/healthz"', False),
    ],
)
def test_the_example_runner_catches_what_a_reader_would_trip_on(
    stack: Stack, tmp_path: Path, code: str, fails: bool
) -> None:
    block = Block("a made-up example", "sh", code)
    ran = _run_shell_block(block, _env(stack), tmp_path)
    if fails:
        with pytest.raises(AssertionError):
            _check(block, ran)
    else:
        _check(block, ran)


LOOPS = ("curl: the answer as it grows (events cursor)", "Batch: a file of requests, with curl")


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("wrong", ["key", "url", "server down"])
def test_the_shell_loops_stop_with_the_error(
    stack: Stack, tmp_path: Path, loop: str, wrong: str
) -> None:
    [block] = [b for b in example_blocks() if b.heading == loop and b.lang == "sh"]
    env = _env(stack)
    shown = {
        "key": '"code":"invalid_api_key"',
        "url": '"code":"not_found"',
        "server down": "curl:(7)",  # its spaces dropped, as the others'
    }[wrong]
    if wrong == "key":
        env["KEY"] = "sk-not-a-key"
    elif wrong == "url":
        env["URL"] = stack.url + "/chatq"
    else:
        env["URL"] = f"http://127.0.0.1:{free_port()}"
    ran = _run_shell_block(block, env, tmp_path, timeout_s=20)
    assert shown in ran.output.replace(" ", ""), ran.output
    assert "Traceback" not in ran.output, ran.output
