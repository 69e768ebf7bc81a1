"""docs/PYTHON.md runs as written: its ```python blocks in order, in one namespace (as a
notebook's cells), and each ```text block right after a python block is that block's output."""

import contextlib
import io
import re

import reference

DOC = reference.ROOT / "docs" / "PYTHON.md"


def blocks():
    """(code, expected output or None) for each python block of the walkthrough."""
    found = re.findall(r"```(python|text)\n(.*?)```", DOC.read_text(), re.S)
    out = []
    for lang, body in found:
        if lang == "python":
            out.append([body, None])
        elif out and out[-1][1] is None:
            out[-1][1] = body
    return out


def test_the_walkthrough_runs_and_prints_what_it_shows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cells = blocks()
    assert len(cells) >= 6, "the walkthrough lost its code"
    namespace = {"__name__": "__walkthrough__"}
    for i, (code, expected) in enumerate(cells):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, f"{DOC.name} block {i + 1}", "exec"), namespace)
        if expected is not None:
            assert printed.getvalue() == expected, f"block {i + 1} printed:\n{printed.getvalue()}"
