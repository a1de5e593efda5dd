"""The README documents every setting the code reads, and its examples run as written.

Examples: every fenced block of the README's "Using it" section is either run or visibly not.
A block fenced ```sh or ```python is run exactly as written against a running stack, with
`URL` and `KEY` exported as the README tells the reader: the shell blocks one after another in
one bash (as pasted into one terminal, so a later block may use an `ID` an earlier one set),
each Python block in its own interpreter. A block that is not meant to run (an install step,
`make up`, Compose) is fenced ```console or ```text instead, and is only shown (as the Quick
start's `make up` is).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import Stack
from tests.procs import ALICE_KEY

pytestmark = pytest.mark.long

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RUN = ("sh", "python")
SHOWN = ("console", "text")
FENCE = re.compile(r"^```([A-Za-z]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
ERROR_OBJECT = re.compile(r'"error"\s*:\s*\{')
WORDS = re.compile(r"\S+")


def test_every_chatq_setting_is_in_the_readme_table() -> None:
    read = sorted((ROOT / "chatq").glob("config*.py")) + sorted(
        (ROOT / "chatq").glob("*_config.py")
    )
    names = {n for path in read for n in re.findall(r'"(CHATQ_[A-Z_]+)"', path.read_text())}
    readme = README.read_text()
    documented = set(re.findall(r"^\| `(CHATQ_[A-Z_]+)` \|", readme, re.MULTILINE))
    assert names, "no settings found in chatq/config.py"
    assert sorted(names - documented) == []
    assert sorted(documented - names) == []


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


def using_it_blocks() -> list[Block]:
    """The fenced blocks of the "Using it" section, in order."""
    text = README.read_text()
    start = text.index("\n## Using it")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end > 0 else len(text)]
    blocks = []
    for part in re.split(r"^(?=### )", section, flags=re.MULTILINE):
        heading = part.splitlines()[0].removeprefix("### ").strip()
        blocks += [Block(heading, m.group(1), m.group(2)) for m in FENCE.finditer(part)]
    return blocks


def test_every_example_is_either_run_or_visibly_shown_only() -> None:
    blocks = using_it_blocks()
    assert [b for b in blocks if b.lang not in RUN + SHOWN] == []
    assert {b.lang for b in blocks} >= set(RUN)


# What each subsection's examples must print, beyond running cleanly.
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


def _run_shell_blocks(blocks: list[Block], env: dict[str, str], cwd: Path) -> list[Ran]:
    """Run the blocks in one bash, in order; what each printed and its exit status."""
    script = ["set -u"]  # an undefined variable is an error, not an empty string
    for i, block in enumerate(blocks):
        script.append(f"{{\n{block.code}\n}} > out{i}.txt 2>&1; echo $? > status{i}.txt")
    subprocess.run(["bash", "-c", "\n".join(script)], cwd=cwd, env=env, timeout=240, check=False)
    return [
        Ran(_read(cwd / f"out{i}.txt"), _read(cwd / f"status{i}.txt").strip() or "none")
        for i in range(len(blocks))
    ]


def _run_python_block(block: Block, env: dict[str, str], cwd: Path) -> Ran:
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
    EXPECT.get(block.heading, lambda _: None)(ran.output)


def test_the_using_it_examples_run_as_written(stack: Stack, tmp_path: Path) -> None:
    blocks = [b for b in using_it_blocks() if b.lang in RUN]
    missing = set(EXPECT) - {b.heading for b in blocks}
    assert not missing, f"README subsections gone or renamed: {sorted(missing)}"
    env = _env(stack)
    shell = [b for b in blocks if b.lang == "sh"]
    ran = dict(zip(map(id, shell), _run_shell_blocks(shell, env, tmp_path), strict=True))
    for block in blocks:
        is_shell = block.lang == "sh"
        _check(block, ran[id(block)] if is_shell else _run_python_block(block, env, tmp_path))


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
    [ran] = _run_shell_blocks([block], _env(stack), tmp_path)
    if fails:
        with pytest.raises(AssertionError):
            _check(block, ran)
    else:
        _check(block, ran)
