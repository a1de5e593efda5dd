"""chatq's own import-linter contract type (`.importlinter`, `contract_types`): capabilities
meet through each other's public module.

A capability is a package or module one level inside a container package (chatq.jobs,
web.http, worker.run, chatq.errors, web.context...). Its public module is itself: its
package's `__init__.py`, which re-exports what other capabilities use. Inside a capability,
modules import each other directly; from any other capability (chatq.jobs from web.jobs too),
only the capability itself is imported, never a module inside it.
"""

from __future__ import annotations

from typing import TypedDict

import grimp
from importlinter import Contract, ContractCheck, fields, output


class Crossing(TypedDict):
    """One import of a module inside another capability."""

    importer: str
    imported: str
    lines: list[tuple[int, str]]  # line number and text of each import statement


def capability(module: str) -> str:
    """The capability `module` belongs to: its first two components."""
    return ".".join(module.split(".")[:2])


def crosses(importer: str, imported: str, containers: set[str]) -> bool:
    """Whether `importer` reaches into a module inside another capability."""
    inside = imported.count(".") >= 2 and imported.split(".")[0] in containers
    return inside and capability(importer) != capability(imported)


def crossings(graph: grimp.ImportGraph, containers: set[str]) -> list[Crossing]:
    """Every import of `graph` from one capability into a module inside another."""
    found: list[Crossing] = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            if crosses(importer, imported, containers):
                details = graph.get_import_details(importer=importer, imported=imported)
                lines = sorted((d["line_number"], d["line_contents"]) for d in details)
                found.append(Crossing(importer=importer, imported=imported, lines=lines))
    return found


class PublicModulesContract(Contract):
    """Capabilities (one level inside each of `containers`) import each other only through
    their public module, the capability itself.

    Configuration options:
        - containers: the packages whose children are capabilities (chatq, web, worker).
    """

    containers = fields.ListField(subfield=fields.StringField())

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        """Kept when no import reaches into a module inside another capability."""
        containers: list[str] = self.containers  # type: ignore[assignment]
        found = crossings(graph, set(containers))
        output.verbose_print(verbose, f"{len(found)} imports into another capability's modules")
        return ContractCheck(kept=not found, metadata={"crossings": found})

    def render_broken_contract(self, check: ContractCheck) -> None:
        """Each offending import, with its lines, and what to import instead."""
        found: list[Crossing] = check.metadata["crossings"]
        output.print_error(
            f"{len(found)} imports reach into another capability's modules; import the "
            "capability (its package re-exports the name, in its __init__.py and __all__):",
            bold=False,
        )
        output.new_line()
        for crossing in found:
            imported = crossing["imported"]
            output.print_error(
                f"- {crossing['importer']} -> {imported}: import {capability(imported)}",
                bold=False,
            )
            for number, text in crossing["lines"]:
                output.indent_cursor()
                output.print_error(f"l.{number}: {text}", bold=False)
        output.new_line()
