"""The parity SQL files (``queries/parity/*.sql``) and what the package does to them.

The SQL is the source of truth for shapes, verdicts and diagnoses: users
read and run the same files. The package only (a) finds them, (b) splits a
file into its statements, (c) substitutes ``$name`` placeholders with SQL
literals, and (d) swaps the function names when comparing other functions
than the product pair (e.g. a variant of the Python path under test).

Where the files are looked for, first hit wins:

1. ``$AICSQL_PARITY_SQL`` (a directory);
2. ``aicsql/parity/sql/`` inside the installed package (for a wheel that
   ships copies of them);
3. ``<repository>/queries/parity/`` (a checkout, or an editable install).
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Dict, List, Mapping, Union

__all__ = ["sql_dir", "load", "statements", "literal", "substitute", "rename_functions", "check_identifier"]

_HERE = Path(__file__).resolve().parent
_CANDIDATES = (_HERE / "sql", _HERE.parents[2] / "queries" / "parity")


def sql_dir() -> Path:
    """The directory holding the parity SQL files (see the module docstring)."""
    override = os.environ.get("AICSQL_PARITY_SQL")
    if override:
        path = Path(override)
        if not path.is_dir():
            raise FileNotFoundError(f"$AICSQL_PARITY_SQL = {override!r} is not a directory")
        return path
    for path in _CANDIDATES:
        if (path / "gemm_parity.sql").is_file():
            return path
    raise FileNotFoundError(
        "the parity SQL files (gemm_parity.sql, ...) were not found in "
        + ", ".join(str(p) for p in _CANDIDATES)
        + "; set $AICSQL_PARITY_SQL to the repository's queries/parity directory"
    )


def load(name: str) -> str:
    """The text of ``queries/parity/<name>``."""
    return (sql_dir() / name).read_text(encoding="utf-8")


def statements(text: str) -> List[str]:
    """The statements of a SQL file, without their ``;``.

    A statement ends at a line whose code (before any ``--`` comment) ends
    with ``;``. Lines that are only a ``--`` comment are dropped (the files
    keep their explanations there); comments after code stay, DataFusion
    skips them. This is all the parsing our own files need: they put no
    ``;`` or ``--`` inside string literals.
    """
    out: List[str] = []
    current: List[str] = []
    for line in text.splitlines():
        if line.strip().startswith("--"):
            continue
        code = line.split("--", 1)[0].rstrip()
        if code.endswith(";"):
            current.append(code[:-1])
            stmt = "\n".join(current).strip()
            if stmt:
                out.append(stmt)
            current = []
        else:
            current.append(line)
    rest = "\n".join(current).strip()
    if rest:
        out.append(rest)
    return out


def literal(value: Union[str, int, float, None]) -> str:
    """``value`` as a SQL literal: strings quoted, integers as digits, floats
    as their shortest exact text, None as NULL."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        raise TypeError("booleans are not parity parameters")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a finite SQL number")
        return repr(value)  # the shortest text that reads back as the same double
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    raise TypeError(f"cannot put {value!r} into SQL as a literal")


def substitute(text: str, params: Mapping[str, Union[str, int, float, None]]) -> str:
    """Replaces every ``$name`` by ``params[name]`` as a SQL `literal`. A
    placeholder without a value is an error, so a typo cannot leave a ``$``
    for DataFusion to misread."""

    def repl(match: "re.Match[str]") -> str:
        name = match.group(1)
        if name not in params:
            raise KeyError(f"no value for SQL placeholder ${name}")
        return literal(params[name])

    return re.sub(r"\$([A-Za-z_][A-Za-z0-9_]*)", repl, text)


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def check_identifier(name: str) -> str:
    """`name` if it is a plain SQL function name; ValueError otherwise."""
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise ValueError(f"{name!r} is not a plain SQL function name")
    return name


def rename_functions(text: str, names: Dict[str, str]) -> str:
    """Replaces calls ``old(`` by ``new(`` for each ``old -> new`` in one pass
    (so a new name that contains an old one is not renamed twice)."""
    names = {old: check_identifier(new) for old, new in names.items() if old != new}
    if not names:
        return text
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, names), key=len, reverse=True)) + r")(\s*\()")
    return pattern.sub(lambda m: names[m.group(1)] + m.group(2), text)
