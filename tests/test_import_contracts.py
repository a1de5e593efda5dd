"""scripts/import_contracts.py, the contract that capabilities meet through each other's public
module: it fails on an import of a module inside another capability, naming it and its line,
and `.importlinter` checks chatq, web and worker with it. And what the packages' re-exports
make the entry points load before gevent's patch: none of the app."""

from __future__ import annotations

import configparser
from pathlib import Path

import grimp
import pytest

from scripts.import_contracts import PublicModulesContract
from tests.procs import python_output

ROOT = Path(__file__).resolve().parents[1]
MODULES = (
    "shop",
    "shop.orders",
    "shop.orders.record",
    "shop.orders.store",
    "shop.errors",
    "shop.billing",
    "shop.billing.charge",
    "till",
    "till.orders",
    "till.orders.routes",
)


def _graph(*imports: tuple[str, str, int, str]) -> grimp.ImportGraph:
    graph = grimp.ImportGraph()
    for module in MODULES:
        graph.add_module(module)
    for importer, imported, line_number, line_contents in imports:
        graph.add_import(
            importer=importer,
            imported=imported,
            line_number=line_number,
            line_contents=line_contents,
        )
    return graph


def _contract() -> PublicModulesContract:
    return PublicModulesContract(
        name="public modules", session_options={}, contract_options={"containers": ["shop", "till"]}
    )


def test_imports_of_a_capability_itself_and_inside_one_capability_keep_it() -> None:
    graph = _graph(
        ("shop.billing.charge", "shop.orders", 3, "from shop.orders import Order"),
        ("shop.billing.charge", "shop.errors", 4, "from shop.errors import Refused"),
        ("shop.orders.store", "shop.orders.record", 5, "from shop.orders.record import Order"),
        ("shop.orders", "shop.orders.store", 1, "from shop.orders.store import Store"),
        ("till.orders.routes", "shop.orders", 2, "from shop import orders"),
    )
    check = _contract().check(graph, verbose=False)
    assert check.kept and check.metadata["crossings"] == []


def test_an_import_of_a_module_inside_another_capability_breaks_it_with_its_lines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    graph = _graph(
        ("shop.billing.charge", "shop.orders.store", 3, "from shop.orders.store import Store"),
        ("shop.billing.charge", "shop.orders.store", 9, "from shop.orders.store import LOST"),
        # The same capability's name in another container is another capability.
        ("till.orders.routes", "shop.orders.record", 7, "from shop.orders.record import Order"),
        ("till.orders.routes", "shop.orders", 8, "from shop.orders import Store"),
    )
    contract = _contract()
    check = contract.check(graph, verbose=False)
    assert not check.kept
    assert check.metadata["crossings"] == [
        {
            "importer": "shop.billing.charge",
            "imported": "shop.orders.store",
            "lines": [
                (3, "from shop.orders.store import Store"),
                (9, "from shop.orders.store import LOST"),
            ],
        },
        {
            "importer": "till.orders.routes",
            "imported": "shop.orders.record",
            "lines": [(7, "from shop.orders.record import Order")],
        },
    ]
    contract.render_broken_contract(check)
    shown = capsys.readouterr().out
    assert "- shop.billing.charge -> shop.orders.store: import shop.orders" in shown
    assert "l.9: from shop.orders.store import LOST" in shown
    assert "- till.orders.routes -> shop.orders.record: import shop.orders" in shown


def test_importlinter_checks_chatq_web_and_worker_with_it() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    types = config["importlinter"]["contract_types"].split()
    assert "scripts.import_contracts.PublicModulesContract" in types
    ours = [
        section
        for name, section in config.items()
        if name.startswith("importlinter:contract:") and section.get("type") == "public_modules"
    ]
    assert [s["containers"].split() for s in ours] == [["chatq", "web", "worker"]]


@pytest.mark.parametrize("entry", ["web.__main__", "worker.__main__"])
def test_an_entry_point_loads_none_of_the_app_before_it_patches_gevent(entry: str) -> None:
    # The web's master forks its workers, which patch gevent in, then build the app; it sets
    # PROMETHEUS_MULTIPROC_DIR, which prometheus_client reads once, when first imported.
    heavy = ("prometheus_client", "redis", "flask", "celery", "kombu", "requests")
    code = f"import sys, {entry}\nprint([m for m in {heavy!r} if m in sys.modules])"
    assert python_output(code) == "[]"
