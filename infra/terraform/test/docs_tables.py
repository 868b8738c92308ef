"""The README's Inputs and Outputs tables, from variables.tf and outputs.tf.

`python3 test/docs_tables.py` (in infra/terraform, with python-hcl2) prints them; test_structure.py
checks that the README holds exactly these rows.
"""

from __future__ import annotations

import os
import re

import hcl

MODULE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _code(text: str) -> str:
    """An expression's source on one line, as a Markdown code span: object attributes
    separated by commas."""
    one_line = " ".join(line.strip() for line in text.splitlines() if line.strip())
    one_line = re.sub(r"(?<=[^{(\s,]) (?=[a-z_]+ = )", ", ", one_line)
    return f"`{one_line}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;")


def input_rows(config: hcl.Configuration) -> list[list[str]]:
    rows = []
    for name, block in config.variables.items():
        default = _code(block.text("default")) if "default" in block.attrs else "n/a"
        rows.append([
            f"`{name}`",
            _cell(config.eval(block.attrs["description"])),
            _code(block.text("type")),
            default,
            "no" if "default" in block.attrs else "yes",
        ])
    return rows


def output_rows(config: hcl.Configuration) -> list[list[str]]:
    return [[f"`{name}`", _cell(config.eval(block.attrs["description"]))] for name, block in config.outputs.items()]


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


INPUTS_HEADER = ["Name", "Description", "Type", "Default", "Required"]
OUTPUTS_HEADER = ["Name", "Description"]

if __name__ == "__main__":
    module = hcl.Configuration(MODULE)
    print("## Inputs\n")
    print(table(INPUTS_HEADER, input_rows(module)))
    print("\n## Outputs\n")
    print(table(OUTPUTS_HEADER, output_rows(module)))
