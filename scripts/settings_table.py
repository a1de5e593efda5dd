"""`python -m scripts.settings_table [FILE] [--check]`: write the settings table, generated from
the declarations in chatq/config/*.py, between the markers of docs/settings.md (or of FILE; a
FILE that does not exist is made, holding the table alone). `--check` writes nothing and fails
when the table there is not current."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from chatq.config.table import table, with_table, write_table

PAGE = Path(__file__).resolve().parents[1] / "docs" / "settings.md"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", type=Path, default=PAGE)
    parser.add_argument("--check", action="store_true", help="only say whether it is current")
    args = parser.parse_args()
    if args.check:
        text = args.file.read_text()
        if with_table(text, table()) != text:
            command = "python -m scripts.settings_table" + (
                "" if args.file == PAGE else f" {args.file}"
            )
            print(
                f"{args.file}: the settings table is not current: run `{command}`", file=sys.stderr
            )
            return 1
        return 0
    print(f"{args.file}: {'written' if write_table(args.file) else 'already current'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
