"""The results table's documented schema (results/README.md, "summary.json") and the types runs.csv is read
back with (suite/results.py) are one schema: a field typed in one place and not the other fails here."""

from __future__ import annotations

from pathlib import Path

from suite import results

README = Path(__file__).resolve().parents[1] / "results" / "README.md"


def documented() -> dict[str, str]:
    """Each summary field of the README's table and the first word of its type (``str``, ``int``, ...)."""
    text = README.read_text()
    table = text[text.index("| key | type | meaning |"):].split("\n\n")[0].splitlines()[2:]
    fields = {}
    for row in table:
        keys, kind = row.split("|")[1:3]
        for key in (k.strip().strip("`") for k in keys.split(",")):
            fields[key] = kind.strip().split()[0].rstrip(",")
    return fields


def test_the_readme_table_is_read():
    fields = documented()
    assert fields["run_id"] == "str" and fields["seed"] == "int" and fields["test_acc"] == "float"


def test_text_and_integer_fields_are_typed_as_documented():
    fields = documented()
    text = {k for k, t in fields.items() if t == "str"}
    ints = {k for k, t in fields.items() if t == "int"}
    assert text - results.TEXT_FIELDS == set(), "documented as text, read back as numbers when they look like one"
    assert ints - results.INT_FIELDS == set(), "documented as int, read back as floats from a column with gaps"
    assert {k for k in results.TEXT_FIELDS | results.INT_FIELDS if k not in fields and k != "run_dir"} == set()


def test_every_numeric_result_is_documented_as_a_number():
    fields = documented()
    assert {k: fields.get(k) for k in results.NUMERIC if fields.get(k) not in ("int", "float")} == {}
