"""The chat demo at `/`, driven in a real headless Chromium against the real stack."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from playwright.sync_api import ConsoleMessage, Page, Response, sync_playwright

from tests.conftest import Stack
from tests.procs import ALICE_KEY, ROOT

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT = ROOT / ".run" / "browser.png"
STREAM_MODEL = "fake:ttft=0.2,tps=20,tokens=40"
DONE_TIMEOUT_MS = 30_000

# Records every text the answer shows, with the status shown at that moment.
_WATCH_ANSWER = """() => {
  window.seen = [];
  const answer = document.getElementById('answer');
  const status = document.getElementById('status');
  new MutationObserver(() => {
    window.seen.push([answer.textContent, status.textContent]);
  }).observe(answer, {childList: true, characterData: true, subtree: true});
}"""


def _console_error(msg: ConsoleMessage, errors: list[str]) -> None:
    # API errors (a wrong key's 401) are expected; `_asset_error` checks the page's own files.
    if msg.type == "error" and not msg.text.startswith("Failed to load resource"):
        errors.append(msg.text)


def _asset_error(resp: Response, errors: list[str]) -> None:
    if resp.status >= 400 and "/v1/" not in resp.url:
        errors.append(f"{resp.status} {resp.url}")


@pytest.fixture
def page(tmp_path: Path) -> Iterator[Page]:
    """A page in a fresh headless Chromium profile; fails on a script error or a missing asset."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's chromium (`apt-get install chromium`; "
            "`make test` does it when TEST_DEB_PACKAGES includes chromium)"
        )
    errors: list[str] = []
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
        )
        try:
            tab = context.pages[0] if context.pages else context.new_page()
            tab.on("pageerror", lambda exc: errors.append(str(exc)))
            tab.on("console", lambda msg: _console_error(msg, errors))
            tab.on("response", lambda resp: _asset_error(resp, errors))
            yield tab
        finally:
            context.close()
    assert errors == [], f"the page logged errors: {errors}"


NOT_SERVED = "GET / answered {}: is web.pages.demo.bp registered (web/pages/ops.py)?"


def _open(page: Page, stack: Stack) -> None:
    resp = page.goto(stack.url + "/")
    status = resp.status if resp else None
    assert status == 200, NOT_SERVED.format(status)
    page.wait_for_selector("#send")


def _ask(page: Page, prompt: str, model: str = STREAM_MODEL, key: str = ALICE_KEY) -> None:
    page.fill("#key", key)
    page.fill("#model", model)
    page.fill("#prompt", prompt)
    page.click("#send")


def _wait_status(page: Page, status: str) -> None:
    page.wait_for_function(
        "s => document.getElementById('status').textContent === s",
        arg=status,
        timeout=DONE_TIMEOUT_MS,
    )


def _job_id(page: Page) -> str:
    found = re.search(r"job_[\w-]+", page.inner_text("#job"))
    assert found, "the page does not show the job id"
    return found.group(0)


def test_page_loads_without_a_key(stack: Stack) -> None:
    resp = requests.get(stack.url + "/", timeout=10)
    assert resp.status_code == 200, NOT_SERVED.format(resp.status_code)
    assert resp.headers["Content-Type"].startswith("text/html")
    assert "script-src 'self'" in resp.headers["Content-Security-Policy"]
    for asset in ("/demo/demo.js", "/demo/demo.css"):
        assert asset in resp.text
        assert requests.get(stack.url + asset, timeout=10).status_code == 200


def test_answer_grows_as_events_arrive_then_completes(page: Page, stack: Stack) -> None:
    _open(page, stack)
    page.evaluate(_WATCH_ANSWER)
    _ask(page, "Tell me a story about queues.")
    _wait_status(page, "completed")

    seen: list[list[str]] = page.evaluate("window.seen")
    growing = {len(text) for text, status in seen if text and status != "completed"}
    assert len(growing) >= 3, f"the answer did not grow in steps before completion: {seen}"
    answer = page.inner_text("#answer")
    assert len(answer.split()) == 40
    job = stack.get(_job_id(page)).json()
    assert job["status"] == "completed"
    assert job["output_text"] == page.eval_on_selector("#answer", "el => el.textContent")
    assert page.is_hidden("#error")
    assert page.is_enabled("#send")
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=True)


def test_wrong_key_shows_the_api_error(page: Page, stack: Stack) -> None:
    expected = stack.submit(key="sk-wrong").json()["error"]["message"]
    _open(page, stack)
    _ask(page, "hello", key="sk-wrong")
    page.wait_for_selector("#error", state="visible", timeout=DONE_TIMEOUT_MS)
    assert expected in page.inner_text("#error")
    assert "401" in page.inner_text("#error")
    assert page.inner_text("#status") == "error"
    assert page.input_value("#prompt") == "hello", "a failed submission keeps the prompt"
    assert page.is_enabled("#send")


def test_earlier_turns_stay_in_the_log_and_the_key_is_remembered(page: Page, stack: Stack) -> None:
    _open(page, stack)
    _ask(page, "first question", model="fake:tokens=5")
    _wait_status(page, "completed")
    first_answer = page.inner_text("#answer")
    _ask(page, "second question", model="fake:tokens=3")
    _wait_status(page, "completed")

    log = page.inner_text("#log")
    assert "first question" in log and first_answer in log
    assert "second question" not in log
    assert len(page.inner_text("#answer").split()) == 3
    page.reload()
    assert page.input_value("#key") == ALICE_KEY


def test_script_is_plain_es5_with_xhr_only() -> None:
    source = (ROOT / "web" / "pages" / "static" / "demo.js").read_text()
    banned: dict[str, Any] = {
        "arrow function": r"=>",
        "template literal": r"`",
        "let/const/class": r"\b(let|const|class)\s",
        "fetch": r"\bfetch\s*\(",
        "EventSource": r"\bEventSource\b",
        "Promise/async": r"\b(Promise|async|await)\b",
    }
    found = [name for name, pattern in banned.items() if re.search(pattern, source)]
    assert found == [], f"demo.js uses {found}; it must stay ES5 with XMLHttpRequest only"


def _response_id(page: Page) -> str:
    found = re.search(r"resp_[\w-]+", page.inner_text("#job"))
    assert found, "the page does not show the response id"
    return found.group(0)


def test_background_toggle_creates_a_response_and_long_polls_it(page: Page, stack: Stack) -> None:
    _open(page, stack)
    sent: list[tuple[str, str]] = []
    page.on("request", lambda req: sent.append((req.method, req.url)))
    page.check("#background")
    _ask(page, "A background question.", model="fake:ttft=0.3,tokens=12")
    _wait_status(page, "completed")

    rid = _response_id(page)
    assert [url for method, url in sent if method == "POST"] == [stack.url + "/v1/responses"]
    polls = [url for method, url in sent if method == "GET" and "/v1/" in url]
    assert polls and all(url.startswith(f"{stack.url}/v1/responses/{rid}?wait=") for url in polls)
    response = stack.session().get(f"{stack.url}/v1/responses/{rid}", timeout=10).json()
    assert response["status"] == "completed" and response["background"] is True
    shown = page.eval_on_selector("#answer", "el => el.textContent")
    assert shown == response["output_text"] and len(shown.split()) == 12
    assert page.is_hidden("#error") and page.is_enabled("#send")


def test_cancel_of_a_background_response_goes_to_its_cancel(page: Page, stack: Stack) -> None:
    _open(page, stack)
    page.check("#background")
    _ask(page, "Never mind.", model="fake:ttft=30")
    page.wait_for_function(
        "() => !document.getElementById('cancel').disabled", timeout=DONE_TIMEOUT_MS
    )
    page.click("#cancel")
    _wait_status(page, "cancelled")
    rid = _response_id(page)
    response = stack.session().get(f"{stack.url}/v1/responses/{rid}", timeout=10).json()
    assert response["status"] == "cancelled"
