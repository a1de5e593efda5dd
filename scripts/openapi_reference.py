"""`python -m scripts.openapi_reference [--check]`: write docs/reference.md, the Markdown view of
the OpenAPI document the web serves at /openapi.json (built here in-process by
`web.openapi.document.document`, with the default settings' caps). `--check` writes nothing and
fails when the page is not current; tests/test_docs.py runs it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from web.openapi.document import document

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference.md"
METHODS = ("get", "post", "put", "patch", "delete", "options")
HEAD = """# OpenAPI reference

Every operation and schema of the OpenAPI {version} document that each web process serves at
`GET /openapi.json`, with the default settings' caps. This page is written from that document by
`python -m scripts.openapi_reference`; a test fails when it is not current. The contract in
outline is [the API in brief](api.md).
"""


def cell(text: object) -> str:
    """One table cell: one line, with its pipes escaped."""
    return " ".join(str(text).split()).replace("|", r"\|")


def ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def type_of(schema: dict[str, Any]) -> str:
    """A schema in a few words: a link to a named one, else its type."""
    if "$ref" in schema:
        name = ref_name(schema["$ref"])
        return f"[{name}](#{name.lower()})"
    for combiner in ("oneOf", "anyOf", "allOf"):
        if combiner in schema:
            return " or ".join(type_of(s) for s in schema[combiner])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {type_of(schema.get('items', {}))}"
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    return "\\|".join(kind) if isinstance(kind, list) else str(kind)


def resolve(doc: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """A parameter or header, its `$ref` followed."""
    if "$ref" not in item:
        return item
    _, _, section, name = item["$ref"].split("/")
    found: dict[str, Any] = doc["components"][section][name]
    return found


def operation(doc: dict[str, Any], path: str, method: str, op: dict[str, Any]) -> list[str]:
    """An operation's section: what it does, its parameters, its body and its answers."""
    out = [f"### `{method.upper()} {path}`", "", f"**{op.get('summary', '')}**", ""]
    if op.get("description"):
        out += [op["description"].strip(), ""]
    params = [resolve(doc, p) for p in op.get("parameters", [])]
    if params:
        out += ["| parameter | in | type | what |", "|---|---|---|---|"]
        out += [
            f"| `{p['name']}` | {p['in']} | {type_of(p.get('schema', {}))} | "
            f"{cell(p.get('description', ''))} |"
            for p in params
        ]
        out.append("")
    for kind, media in op.get("requestBody", {}).get("content", {}).items():
        out += [f"Body (`{kind}`): {type_of(media.get('schema', {}))}", ""]
    out += ["| status | what | body |", "|---|---|---|"]
    for status, answer in op.get("responses", {}).items():
        bodies = ", ".join(
            f"{type_of(m.get('schema', {}))} (`{k}`)" for k, m in answer.get("content", {}).items()
        )
        out.append(f"| {status} | {cell(answer.get('description', ''))} | {bodies} |")
    return [*out, ""]


def schema_section(name: str, schema: dict[str, Any]) -> list[str]:
    """A named schema's section: its description and a row per property."""
    out = [f"### {name}", ""]
    if schema.get("description"):
        out += [schema["description"].strip(), ""]
    props = schema.get("properties", {})
    if props:
        required = set(schema.get("required", []))
        out += ["| property | type | required | what |", "|---|---|---|---|"]
        out += [
            f"| `{key}` | {type_of(prop)} | {'yes' if key in required else ''} | "
            f"{cell(prop.get('description', ''))} |"
            for key, prop in props.items()
        ]
    else:
        out.append(f"{type_of({k: v for k, v in schema.items() if k != 'description'})}")
    return [*out, ""]


def page() -> str:
    """The whole page, from the document as served."""
    doc = document()
    out = [HEAD.format(version=doc["openapi"]), "## Operations", ""]
    for path, item in doc["paths"].items():
        for method in METHODS:
            if method in item:
                out += operation(doc, path, method, item[method])
    out += ["## Schemas", ""]
    for name, schema in doc["components"]["schemas"].items():
        out += schema_section(name, schema)
    return "\n".join(out).rstrip("\n") + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say whether it is current")
    args = parser.parse_args()
    text = page()
    if args.check:
        if not PAGE.exists() or PAGE.read_text() != text:
            print(f"{PAGE.name} is not current: run `python -m scripts.openapi_reference`")
            return 1
        return 0
    PAGE.write_text(text)
    print(f"{PAGE.name}: written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
