"""The `POST /v1/chat/completions` handler: replies, pacing and simulated failures."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import NoReturn

from aiohttp import web

from fakellm.errors import ApiError, simulated_error
from fakellm.payloads import DONE_EVENT, Reply, StreamEvents, completion_body, usage
from fakellm.ratelimit import DEFAULT_OUTPUT_TOKENS, RateLimits
from fakellm.request import ChatRequest, parse_request
from fakellm.text import deltas, prompt_word_count, reply_words

_SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
_GARBAGE_JSON = b'{"id": "chatcmpl-garbage", "object": "chat.completion", "choices": [<html>oops'
_GARBAGE_SSE = b'data: {"id": "chatcmpl-garbage", "choices": [\n\nthis is not an event stream\n\n'


class AttemptCounter:
    """Counts attempts of the same request, for `fail_first`; forgets the oldest past a cap."""

    def __init__(self, max_entries: int = 100_000) -> None:
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._max_entries = max_entries

    def bump(self, key: str) -> int:
        """Record one more attempt of `key` and return its attempt number (1-based)."""
        count = self._counts.pop(key, 0) + 1
        self._counts[key] = count
        if len(self._counts) > self._max_entries:
            self._counts.popitem(last=False)
        return count


class Pacer:
    """When each token is due: `ttft_s` after the start, then one every `1/tps` seconds."""

    def __init__(self, ttft_s: float, tps: float) -> None:
        self._loop = asyncio.get_running_loop()
        self._start = self._loop.time()
        self._ttft_s = ttft_s
        self._interval_s = 1.0 / tps if tps > 0 else 0.0

    def delay_s(self, index: int) -> float:
        """Seconds from now until token `index` (0-based) is due; <= 0 when already due."""
        due = self._start + self._ttft_s + index * self._interval_s
        return due - self._loop.time()

    async def wait(self, index: int) -> None:
        """Sleep until token `index` is due."""
        delay_s = self.delay_s(index)
        if delay_s > 0:
            await asyncio.sleep(delay_s)


async def _wait_for_disconnect() -> NoReturn:
    # The server cancels the handler when the client closes the connection.
    await asyncio.Event().wait()
    raise AssertionError("unreachable: the event is never set")


async def _cut(request: web.BaseRequest) -> NoReturn:
    transport = request.transport
    if transport is not None:
        # abort() drops unsent bytes; close() still flushes what the client must see first.
        if transport.get_write_buffer_size():
            transport.close()
        else:
            transport.abort()
    await _wait_for_disconnect()


def _garbage(stream: bool, headers: dict[str, str]) -> web.Response:
    if stream:
        return web.Response(body=_GARBAGE_SSE, headers={**_SSE_HEADERS, **headers})
    return web.Response(body=_GARBAGE_JSON, content_type="application/json", headers=headers)


def _failing(chat: ChatRequest, attempts: AttemptCounter) -> bool:
    knobs = chat.knobs
    if not knobs.fails:
        return False
    if knobs.fail_first is None:
        return True
    return attempts.bump(chat.key()) <= knobs.fail_first


async def _early_failure(chat: ChatRequest, headers: dict[str, str]) -> web.Response | None:
    knobs = chat.knobs
    if knobs.hang:
        await _wait_for_disconnect()
    if knobs.status is not None:
        error = simulated_error(knobs.status, knobs.retry_after_header)
        error.headers.update(headers)
        raise error
    if knobs.garbage:
        return _garbage(chat.stream, headers)
    return None


async def _complete(
    request: web.BaseRequest,
    chat: ChatRequest,
    words: list[str],
    cut_after: int | None,
    headers: dict[str, str],
) -> web.StreamResponse:
    pacer = Pacer(chat.knobs.ttft_s, chat.knobs.tps)
    if cut_after is not None:
        await pacer.wait(max(min(cut_after, len(words)) - 1, 0))
        await _cut(request)
    await pacer.wait(max(len(words) - 1, 0))
    body = completion_body(
        Reply.new(chat.model),
        " ".join(words),
        usage(prompt_word_count(chat.messages), len(words)),
        _finish_reason(chat, words),
    )
    return web.Response(body=body, content_type="application/json", headers=headers)


def _finish_reason(chat: ChatRequest, words: list[str]) -> str:
    """`length` for an answer cut at `max_tokens` (see `_cut_to_max_tokens`), else `stop`."""
    return (
        "length"
        if chat.max_tokens is not None
        and len(words) == chat.max_tokens
        and chat.max_tokens < len(reply_words(chat.messages, chat.knobs.tokens))
        else "stop"
    )


def _cut_to_max_tokens(chat: ChatRequest, words: list[str]) -> list[str]:
    return words if chat.max_tokens is None else words[: chat.max_tokens]


def _tail(chat: ChatRequest, events: StreamEvents, words: list[str]) -> list[bytes]:
    tail = [events.delta({}, _finish_reason(chat, words))]
    if chat.include_usage:
        tail.append(events.usage(usage(prompt_word_count(chat.messages), len(words))))
    tail.append(DONE_EVENT)
    return tail


async def _pace(
    response: web.StreamResponse, pending: list[bytes], pacer: Pacer, index: int
) -> None:
    if pacer.delay_s(index) > 0:
        if pending:
            await response.write(b"".join(pending))
            pending.clear()
        await pacer.wait(index)


async def _stream(
    request: web.BaseRequest,
    chat: ChatRequest,
    words: list[str],
    cut_after: int | None,
    headers: dict[str, str],
) -> web.StreamResponse:
    pacer = Pacer(chat.knobs.ttft_s, chat.knobs.tps)
    events = StreamEvents(Reply.new(chat.model, chat.include_usage))
    response = web.StreamResponse(headers={**_SSE_HEADERS, **headers})
    await response.prepare(request)
    # Events due at the same time go out in one write.
    pending = [events.delta({"role": "assistant", "content": ""})]
    sent = words if cut_after is None else words[:cut_after]
    for index, content in enumerate(deltas(sent)):
        await _pace(response, pending, pacer, index)
        pending.append(events.content(content))
    if not sent:
        await _pace(response, pending, pacer, 0)
    if cut_after is not None:
        if pending:
            await response.write(b"".join(pending))
        await _cut(request)
    pending.extend(_tail(chat, events, words))
    await response.write(b"".join(pending))
    await response.write_eof()
    return response


def token_cost(chat: ChatRequest) -> int:
    """Tokens a request takes from the TPM limit, counted as OpenAI does on arrival: its
    prompt (fakellm's words) and the output it may ask for."""
    return prompt_word_count(chat.messages) + (chat.max_tokens or DEFAULT_OUTPUT_TOKENS)


async def chat_completions(
    request: web.BaseRequest, attempts: AttemptCounter, limits: RateLimits
) -> web.StreamResponse:
    """Answer one chat-completions request as OpenAI would, or fail as its knobs say."""
    try:
        raw = await request.read()
    except web.HTTPException as exc:
        raise ApiError(exc.status, exc.text or exc.reason) from None
    except web.RequestPayloadError:
        raise ApiError(400, "The request body could not be read.") from None
    chat = parse_request(raw)
    headers = limits.admit(token_cost(chat))
    failing = _failing(chat, attempts)
    if failing:
        early = await _early_failure(chat, headers)
        if early is not None:
            return early
    cut_after = chat.knobs.drop_after if failing else None
    words = _cut_to_max_tokens(chat, reply_words(chat.messages, chat.knobs.tokens))
    if chat.stream:
        return await _stream(request, chat, words, cut_after, headers)
    return await _complete(request, chat, words, cut_after, headers)
