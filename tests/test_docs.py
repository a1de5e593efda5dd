"""The docs site: the OpenAPI reference page is what the served document says, and the site
builds strictly (a broken link, anchor or page fails), with the pages it shows from elsewhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from scripts import openapi_reference
from scripts.docs_hooks import included

ROOT = Path(__file__).resolve().parents[1]


def test_the_openapi_reference_page_is_current() -> None:
    assert openapi_reference.PAGE.read_text() == openapi_reference.page(), (
        "docs/reference.md is not what /openapi.json says: "
        "run `python -m scripts.openapi_reference` and commit docs/reference.md"
    )


def test_the_reference_has_every_operation_and_schema() -> None:
    from web.openapi.document import document

    doc, text = document(), openapi_reference.page()
    for path, item in doc["paths"].items():
        for method in item:
            assert f"### `{method.upper()} {path}`" in text
    for name in doc["components"]["schemas"]:
        assert f"\n### {name}\n" in text


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    benchmarks = (tmp_path / "benchmarks" / "index.html").read_text()
    assert '<img alt="compare" src="../plots/compare.png"' in benchmarks
    assert (tmp_path / "plots" / "compare.png").exists()
    upstreams = (tmp_path / "upstreams" / "index.html").read_text()
    assert "http://localhost:4000/v1" in upstreams
    assert 'href="../limits/#pacing-to-the-upstreams-limits"' in upstreams


def test_the_included_sections_are_there() -> None:
    assert "<!-- bench:results:begin -->" in included("bench-results")
    recipes = included("readme-upstreams")
    assert "## Using it" not in recipes and "](docs/" not in recipes
