"""Bad input: schemathesis against the running stack's own /openapi.json.

Every operation of the document is generated for, positive and negative data, with every
check schemathesis has: once with alice's and bob's keys as peers (so that its object-level
authorization check replays one owner's reads as the other), in every phase (examples,
coverage, fuzzing, stateful), and once with no key at all. Without a key every case is a 401
whatever its data, so `make test` runs that one without the coverage phase (its ~1,900
boundary cases were a third of the file's time); `make test-slow`'s long run has every phase
both ways. Nothing is excluded: the
document's own /openapi.json is not an operation of itself (schemathesis reads it) and is
checked here directly; /metrics (text) and / (HTML) are in the run, checked for status and
content type.

The promise: no 5xx, no answer that violates the document. A failure schemathesis reports
is either a known product bug (listed in KNOWN_BUGS, each with its own test that
reproduces it without schemathesis) or a disagreement accepted on purpose
(ACCEPTED, each with its reason); anything else fails the test.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from tests import chatq_schemas
from tests.conftest import Stack
from tests.procs import ALICE_KEY, BOB_KEY, UPSTREAM_KEY

pytestmark = pytest.mark.long


@dataclass(frozen=True)
class Finding:
    """One failed check of one generated case."""

    operation: str
    check: str
    code: str
    message: str
    status: int | None
    body: str
    request_headers: dict[str, list[str]]
    request_uri: str
    request_body: str = ""

    def __str__(self) -> str:
        return (
            f"{self.operation} {self.check} ({self.code}) -> {self.status}: "
            f"{' / '.join(self.message.splitlines()[:4])} | {self.body[:200]} "
            f"| {self.request_uri} {self.request_headers} {self.request_body[:300]}"
        )


# Product bugs this run found once, now fixed; a new one is listed here, with a test of
# its own that reproduces it, only while it is being fixed.
KNOWN_BUGS: dict[str, Callable[[Finding], bool]] = {}


def _opaque_cursor_refused(f: Finding) -> bool:
    return f.code == "ST202" and '"invalid_cursor"' in f.body


def _unknown_accept_served(f: Finding) -> bool:
    return (
        f.code == "ST201"
        and f.operation == "GET /v1/jobs/{id}/events"
        and f.status == 200
        and "accept" in f.message.lower()
    )


def _sse_event_vs_stream_schema(f: Finding) -> bool:
    return f.code == "ST108" and 'is not of type "string"' in f.message


def _null_is_absent(f: Finding) -> bool:
    """A typed optional body field sent as null, served as if it were left out."""
    found = re.search(r"in body - (\w+): Incorrect type", f.message)
    if f.code != "ST201" or not found:
        return False
    try:
        body = json.loads(f.request_body)
    except ValueError:
        return False
    return isinstance(body, dict) and found.group(1) in body and body[found.group(1)] is None


def _unknown_previous_response(f: Finding) -> bool:
    return f.code == "ST202" and '"previous_response_not_found"' in f.body


# Disagreements between schemathesis's reading of the document and the server that are
# right as they are.
ACCEPTED: dict[str, Callable[[Finding], bool]] = {
    # The document calls a cursor an opaque string (so that clients do not build one) and
    # lists `400 invalid_cursor` for one the API did not give out: schemathesis, reading
    # "string", expects any string to be served.
    "cursor and Last-Event-ID are opaque, and a made-up one is a documented 400": (
        _opaque_cursor_refused
    ),
    # `Accept` is described by the two types served; like any HTTP server, the events
    # endpoint answers JSON to other Accept values rather than 406.
    "an Accept outside the two described types gets JSON": _unknown_accept_served,
    # OpenAPI 3.1 cannot describe one Server-Sent Event: the document describes the stream as
    # `type: string`, and schemathesis applies that schema to each parsed event object.
    "an SSE stream is described as a string, schemathesis checks each event": (
        _sse_event_vs_stream_schema
    ),
    # Like OpenAI's API, an optional field sent as null is read as not sent (`stream: null`
    # is no stream); the document types those fields without null.
    "an optional field sent as null counts as absent": _null_is_absent,
    # `previous_response_id` must name a completed response of the key; like OpenAI's API, one
    # that does not is the documented `400 previous_response_not_found`.
    "a previous_response_id that names no response is a documented 400": _unknown_previous_response,
    # `Chatq-Webhook` must name one of the key's own endpoints (or `none`); no schema can say
    # which ids exist, so one that names none is the documented `400 webhook_not_found`.
    "a Chatq-Webhook that names no endpoint of the key is a documented 400": lambda f: (
        f.code == "ST202" and '"webhook_not_found"' in f.body
    ),
}


def _write_config(tmp_path: Path, peers: bool) -> Path:
    config = tmp_path / ("keyed.toml" if peers else "anonymous.toml")
    lines = [
        # 422 is documented for schema-valid bodies too: an Idempotency-Key reused with
        # another body (schemathesis reuses its generated keys) or a prompt over the context.
        "[checks.positive_data_acceptance]",
        'expected-statuses = ["2xx", "3xx", "401", "403", "404", "409", "422", "429"]',
    ]
    if peers:
        auth = tmp_path / "auth.json"
        auth.write_text(
            json.dumps(
                {
                    "auth": [
                        {
                            "name": name,
                            "fixedHeaders": [{"name": "Authorization", "value": f"Bearer {key}"}],
                        }
                        for name, key in (("alice", ALICE_KEY), ("bob", BOB_KEY))
                    ]
                }
            )
        )
        lines += ["[auth.wfc]", f'path = "{auth}"', 'peers = ["alice", "bob"]']
    config.write_text("\n".join(lines) + "\n")
    return config


@dataclass
class Run:
    """What one schemathesis run did."""

    generated: int
    operations: int
    findings: list[Finding]
    errors: list[Any]
    seed: int
    output: str


def _findings(ndjson: Path) -> list[Finding]:
    found = []
    for line in ndjson.read_text().splitlines():
        scenario = json.loads(line).get("ScenarioFinished")
        if not scenario:
            continue
        recorder = scenario["recorder"]
        for case_id, checks in recorder.get("checks", {}).items():
            interaction = (recorder.get("interactions") or {}).get(case_id) or {}
            response = interaction.get("response") or {}
            content = (response.get("content") or {}).get("$base64", "")
            body = base64.b64decode(content).decode(errors="replace") if content else ""
            request = interaction.get("request") or {}
            sent = (request.get("body") or {}).get("$base64", "")
            sent_body = base64.b64decode(sent).decode(errors="replace") if sent else ""
            for check in checks:
                if check["status"] != "failure":
                    continue
                failure = check["failure_info"]["failure"]
                found.append(
                    Finding(
                        failure["operation"],
                        check["name"],
                        failure["code"],
                        failure.get("message") or "",
                        response.get("status_code"),
                        body,
                        request.get("headers") or {},
                        request.get("uri", ""),
                        sent_body,
                    )
                )
    return found


ALL_PHASES = ("examples", "coverage", "fuzzing", "stateful")


def _schemathesis(
    stack: Stack, tmp_path: Path, examples: int, peers: bool, phases: tuple[str, ...]
) -> Run:
    config = _write_config(tmp_path, peers)
    name = "keyed" if peers else "anonymous"
    report, ndjson = tmp_path / f"{name}.json", tmp_path / f"{name}.ndjson"
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(config),
        "--no-color",
        "run",
        f"{stack.url}/openapi.json",
        "--checks",
        "all",
        "--mode",
        "all",
        "--phases",
        ",".join(phases),
        # One worker: with threads, hypothesis's lambda descriptions hit a CPython 3.11 AST
        # race ("AST constructor recursion depth mismatch") reported as schemathesis errors.
        "--max-examples",
        str(examples),
        "--workers",
        "1",
        "--request-timeout",
        "70",
        # A fixed seed keeps CI repeatable; CHATQ_FUZZ_SEED=<n> explores other cases.
        "--seed",
        os.environ.get("CHATQ_FUZZ_SEED", "20261130"),
        "--report",
        "json,ndjson",
        "--report-json-path",
        str(report),
        "--report-ndjson-path",
        str(ndjson),
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=1500, cwd=tmp_path)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads(report.read_text())
    return Run(
        summary["test_cases"]["generated"],
        summary["operations"]["tested"],
        _findings(ndjson),
        summary["errors"],
        summary["seed"],
        proc.stdout,
    )


def _classify(findings: list[Finding]) -> tuple[list[Finding], dict[str, int]]:
    unexplained, explained = [], dict.fromkeys([*KNOWN_BUGS, *ACCEPTED], 0)
    for f in findings:
        matched = [n for n, test in (KNOWN_BUGS | ACCEPTED).items() if test(f)]
        if matched:
            explained[matched[0]] += 1
        else:
            unexplained.append(f)
    return unexplained, explained


def _fuzz(
    stack: Stack,
    tmp_path: Path,
    keyed_examples: int,
    anonymous_examples: int,
    at_least: int,
    anonymous_phases: tuple[str, ...] = ALL_PHASES,
) -> None:
    # The two runs side by side: the anonymous one only meets 401s, which touch no state.
    with ThreadPoolExecutor(max_workers=2) as pool:
        keyed = pool.submit(
            _schemathesis, stack, tmp_path, keyed_examples, peers=True, phases=ALL_PHASES
        )
        anonymous = pool.submit(
            _schemathesis, stack, tmp_path, anonymous_examples, False, anonymous_phases
        )
        runs = [keyed.result(), anonymous.result()]
    generated = sum(r.generated for r in runs)
    findings = [f for r in runs for f in r.findings]
    unexplained, explained = _classify(findings)
    seeds = [r.seed for r in runs]
    print(f"schemathesis: {generated} cases, seeds {seeds}, explained {explained}")
    for f in unexplained:
        print("UNEXPLAINED", f)
    served = _operations(stack)
    assert [r.operations for r in runs] == [served, served], [r.output[-2000:] for r in runs]
    assert generated >= at_least, generated
    assert [e for r in runs for e in r.errors] == [], [r.output[-3000:] for r in runs]
    assert [f for f in unexplained if f.status is not None and f.status >= 500] == [], seeds
    assert [str(f) for f in unexplained] == [], f"seeds {seeds}"
    # Every answer schemathesis captured: no key of ours in any of them.
    for f in findings:
        for key in (ALICE_KEY, BOB_KEY, UPSTREAM_KEY):
            assert key not in f.body


def _operations(stack: Stack) -> int:
    """How many operations the served document has, less the document itself (schemathesis
    does not test the URL it reads the schema from): it must reach every one."""
    paths = requests.get(f"{stack.url}/openapi.json", timeout=10).json()["paths"]
    return sum(
        1
        for path, item in paths.items()
        for method in item
        if method in METHODS and path != "/openapi.json"
    )


METHODS = frozenset({"get", "post", "put", "patch", "delete"})


def test_schemathesis_finds_no_5xx_and_no_answer_outside_the_document(
    stack: Stack, tmp_path: Path
) -> None:
    _fuzz(
        stack,
        tmp_path,
        keyed_examples=3,
        anonymous_examples=1,
        at_least=300,
        anonymous_phases=("examples", "fuzzing", "stateful"),
    )


@pytest.mark.slow
def test_schemathesis_long_run_finds_no_5xx_and_no_answer_outside_the_document(
    stack: Stack, tmp_path: Path
) -> None:
    _fuzz(stack, tmp_path, keyed_examples=40, anonymous_examples=15, at_least=1500)


def test_the_document_itself_is_served_as_json(stack: Stack) -> None:
    r = requests.get(f"{stack.url}/openapi.json", timeout=10)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json")
    assert r.json()["openapi"] == "3.1.0"


# --- the known bugs, reproduced without schemathesis ------------------------------------


def _document(stack: Stack) -> dict[str, Any]:
    doc: dict[str, Any] = requests.get(f"{stack.url}/openapi.json", timeout=10).json()
    return doc


def test_upstream_4xx_answers_use_statuses_the_document_lists(stack: Stack) -> None:
    documented = set(_document(stack)["paths"]["/v1/chat/completions"]["post"]["responses"])
    body = {"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]}
    r = requests.post(
        f"{stack.url}/v1/chat/completions",
        json=body,
        timeout=30,
        headers={"Authorization": f"Bearer {ALICE_KEY}"},
    )
    assert r.status_code >= 400 and r.json()["error"]
    assert str(r.status_code) in documented, (r.status_code, sorted(documented))


def test_the_message_schema_and_the_server_agree_on_tool_calls(stack: Stack) -> None:
    validator = chatq_schemas.validator("JobRequest", _document(stack))
    for tool_calls in (None, [], {}, 0, "x"):
        body = {"messages": [{"role": "assistant", "tool_calls": tool_calls}]}
        r = requests.post(
            f"{stack.url}/v1/jobs",
            json=body,
            timeout=30,
            headers={"Authorization": f"Bearer {ALICE_KEY}"},
        )
        assert validator.is_valid(body) == (r.status_code != 400), (tool_calls, r.text)


ITEM_TYPE_VIOLATIONS = {
    "stop items are strings": {"stop": [{}]},
    "stop items are strings, not numbers": {"stop": [1]},
    "tools items are objects": {"tools": [1]},
    "content parts are objects": {"messages": [{"role": "user", "content": [1, "x"]}]},
}


@pytest.mark.parametrize(
    "path,schema", [("/v1/jobs", "JobRequest"), ("/v1/chat/completions", "ChatCompletionRequest")]
)
def test_list_items_are_checked_as_the_document_types_them(
    stack: Stack, path: str, schema: str
) -> None:
    validator = chatq_schemas.validator(schema, _document(stack))
    for name, extra in ITEM_TYPE_VIOLATIONS.items():
        body = {"messages": [{"role": "user", "content": "hi"}], **extra}
        assert not validator.is_valid(body), name
        r = requests.post(
            f"{stack.url}{path}",
            json=body,
            timeout=30,
            headers={"Authorization": f"Bearer {ALICE_KEY}", "Prefer": "wait=0"},
        )
        assert r.status_code == 400, (name, r.status_code, r.text[:200])
