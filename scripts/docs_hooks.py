"""MkDocs hooks (`hooks:` in mkdocs.yml): the pages that show what lives elsewhere in the repo.

Nothing is copied into docs/ by hand, so nothing there goes stale:
- `benchmarks.md` shows bench/README.md's results (what `python -m bench --readme` last wrote)
  and the current figures of the sections run on their own, and its plots, from bench/plots;
- `upstreams.md` shows the README's recipes for real upstreams, as the tests run them;
- a link to `#anchor` that is no heading of its own page goes to the page that has it: the
  settings table is written from the declarations in chatq/config/*.py, whose notes name the
  section that explains a setting without knowing which page it is on.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from markdown.extensions.toc import slugify
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench" / "README.md"
README = ROOT / "README.md"
RECIPES = "## Put it in front of a real upstream"
INCLUDE = re.compile(r"^<!-- include: (?P<what>[a-z-]+) -->$", re.MULTILINE)
HEADING = re.compile(r"^(#{1,6}) (.+)$", re.MULTILINE)
FENCED = re.compile(r"^```.*?^```$", re.MULTILINE | re.DOTALL)
LOCAL_LINK = re.compile(r"\]\(#([^)\s]+)\)")
_anchor_page: dict[str, str] = {}


def section(text: str, start: str, end: str) -> str:
    """The lines of `text` from the heading `start` up to (not including) the heading `end`."""
    begin = text.index(f"\n{start}\n") + 1
    return text[begin : text.index(f"\n{end}\n", begin) + 1]


def included(what: str) -> str:
    """The text an `<!-- include: what -->` line stands for."""
    if what == "bench-results":
        return section(BENCH.read_text(), "## Results", "## Where the misses come from")
    if what == "readme-upstreams":
        recipes = section(README.read_text(), RECIPES, "## Using it")
        return recipes.replace("](docs/", "](")
    raise ValueError(f"no include named {what!r}")


def anchors(markdown: str) -> dict[str, int]:
    """The anchors MkDocs gives the headings of a page, each with its heading's level."""
    text = FENCED.sub("", markdown)
    return {slugify(title, "-"): len(level) for level, title in HEADING.findall(text)}


def on_files(files: Files, config: Any) -> Files:
    """Index each page's headings, and add bench/plots/*.png as plots/*.png. An anchor on two
    pages is the one whose heading is the higher, else the one on the page a section is about
    (bench/README.md's results repeat the titles of the sections they measure)."""
    _anchor_page.clear()
    levels: dict[str, tuple[int, bool]] = {}
    for page in files.documentation_pages():
        text = INCLUDE.sub(lambda m: included(m["what"]), Path(page.abs_src_path or "").read_text())
        for anchor, level in anchors(text).items():
            rank = (level, page.src_uri == "benchmarks.md")
            if anchor not in levels or rank < levels[anchor]:
                levels[anchor] = rank
                _anchor_page[anchor] = page.src_uri
    for plot in sorted((ROOT / "bench" / "plots").glob("*.png")):
        files.append(File.generated(config, f"plots/{plot.name}", abs_src_path=str(plot)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Fill the includes, and point each `#anchor` at the page that has it."""
    text = INCLUDE.sub(lambda m: included(m["what"]), markdown)
    own = anchors(text)

    def relink(m: re.Match[str]) -> str:
        anchor = m[1]
        if anchor in own or anchor not in _anchor_page:
            return m[0]
        here = Path(page.file.src_uri).parent
        there = Path(_anchor_page[anchor])
        return f"]({Path(*(['..'] * len(here.parts)), there).as_posix()}#{anchor})"

    return LOCAL_LINK.sub(relink, text)
