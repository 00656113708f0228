"""Recorded outputs (fieldguide/notebooks/outputs.py): a block shows what its code printed on the GPU only
while its code is the code that ran, and a long output starts collapsed."""

import json

import pytest

from fieldguide.notebooks import outputs

SNIPPET = """\
# --8<-- [start:hello]
print("hello")
# --8<-- [end:hello]

# --8<-- [start:many]
for i in range(20):
    print(i)
# --8<-- [end:many]
"""
PAGE = """# P

```python
--8<-- "snippets/demo.py:hello"
```

Text.

```python
--8<-- "snippets/demo.py:many"
```
"""


def recorded(by_code):
    return outputs.Recorded("fake-gpu", "Fake GPU", "2.13.0", "2026-11-26T00:00:00Z", by_code, 16)


def stream(text):
    return [{"name": "stdout", "output_type": "stream", "text": text.splitlines(keepends=True)}]


def test_each_block_shows_what_its_code_printed(tmp_path):
    (tmp_path / "snippets").mkdir()
    (tmp_path / "snippets" / "demo.py").write_text(SNIPPET)
    shown = outputs.under_blocks(PAGE, tmp_path, recorded({
        outputs.code_key('print("hello")'): stream("hello\n"),
        outputs.code_key("for i in range(20):\n    print(i)"): stream("".join(f"{i}\n" for i in range(20))),
    }))
    first, second = shown.split("Text.")
    assert ('???+ output "What this printed on Fake GPU (the GPU to itself, 16 CPU threads; '
            'PyTorch 2.13.0, 2026-11-26)"') in first
    assert "    hello" in first
    assert '??? output "What this printed on Fake GPU' in second  # 20 lines: collapsed
    assert "    19" in second


def test_a_block_whose_code_changed_shows_nothing(tmp_path):
    (tmp_path / "snippets").mkdir()
    (tmp_path / "snippets" / "demo.py").write_text(SNIPPET.replace('print("hello")', 'print("hi")'))
    ran = recorded({outputs.code_key('print("hello")'): stream("hello\n")})
    shown = outputs.under_blocks(PAGE, tmp_path, ran)
    assert shown == PAGE


def test_errors_and_results_read_as_text_without_terminal_colours():
    assert outputs.as_text([
        {"output_type": "execute_result", "data": {"text/plain": ["tensor([1., 2.])"]}, "execution_count": 1,
         "metadata": {}},
        {"output_type": "error", "ename": "RuntimeError", "evalue": "\x1b[31mCUDA out of memory\x1b[0m",
         "traceback": []},
    ]) == "tensor([1., 2.])\nRuntimeError: CUDA out of memory"


def _write(tmp_path, **fields):
    path = tmp_path / "outputs" / "fake-gpu" / "chapter" / "page.json"
    path.parent.mkdir(parents=True)
    record = {"page": "chapter/page.md", "gpu": "Fake GPU", "torch": "2.13.0",
              "date": "2026-11-28T00:00:00Z", "cells": [], **fields}
    path.write_text(json.dumps(record))


def test_only_outputs_recorded_with_the_gpu_to_itself_are_shown(tmp_path):
    _write(tmp_path)  # recorded beside other work (no "alone"): its numbers are not the GPU's
    assert outputs.load("chapter/page.md", "fake-gpu", tmp_path) is None


def test_outputs_recorded_alone_are_shown_with_their_conditions(tmp_path):
    _write(tmp_path, alone=True, cpu_threads=16)
    found = outputs.load("chapter/page.md", "fake-gpu", tmp_path)
    assert found is not None and found.cpu_threads == 16


def test_the_recorder_refuses_under_pytest_xdist(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    with pytest.raises(outputs.NotAlone, match="make outputs"):
        outputs.gpu_alone()


def test_the_recorder_refuses_beside_another_process_on_the_gpu(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    answers = {"--query-compute-apps=pid": ["4242"], "--query-gpu=memory.used": ["600"]}
    monkeypatch.setattr(outputs, "_nvidia_smi", lambda query: answers[query])
    with pytest.raises(outputs.NotAlone, match="4242"):
        outputs.gpu_alone()
    answers["--query-compute-apps=pid"] = []
    outputs.gpu_alone()  # a context's worth of memory in use: its own, allowed
    answers["--query-gpu=memory.used"] = ["600", "20000"]
    with pytest.raises(outputs.NotAlone, match="GiB of GPU memory"):
        outputs.gpu_alone()


def test_the_recorder_refuses_where_it_cannot_see_the_gpu(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(outputs.NotAlone, match="nvidia-smi"):
        outputs.gpu_alone()


PROFILER_PRINT = """before
--------------  ------------  ------------
          Name     Self CUDA    # of Calls
--------------  ------------  ------------
 ProfilerStep*       0.000us             3
void k<4, at...      1.000ms            24
--------------  ------------  ------------
Self CUDA time total: 1.000ms"""


def test_a_profiler_table_shows_as_a_table_between_its_text():
    assert [kind for kind, _ in outputs.pieces(PROFILER_PRINT)] == ["text", "table", "text"]
    assert outputs.as_markdown_table(outputs.pieces(PROFILER_PRINT)[1][1]) == [
        "| Name | Self CUDA | # of Calls |",
        "| --- | --: | --: |",
        "| `ProfilerStep*` | 0.000us | 3 |",
        "| `void k<4, at...` | 1.000ms | 24 |",
    ]
    box = "\n".join(outputs._box(PROFILER_PRINT, "", recorded({})))
    assert "    before\n" in box and "    | `ProfilerStep*` | 0.000us | 3 |" in box
    assert box.count("```text") == 2  # the lines before and after stay text


def test_dashes_that_are_no_table_stay_text():
    text = "-----  -----\nnot a header\n-----  -----\n"
    assert [kind for kind, _ in outputs.pieces(text)] == ["text"]


# --- A block the notebook cut into parts for its prompts keeps its output on the page ----------

SCRIPT = """\
GPUS_NEEDED = 0

# --8<-- [start:main]
print("first")
x = 2
# the second part: its comment goes with it
print("second", x)

if x:
    print("third")
x
# --8<-- [end:main]
"""
SCRIPT_PAGE = """# P

??? predict "How many lines does the first part print?"
    One.

??? predict "What does the second part print?"
    Two words.

    <!-- notebook-part: print("second", x) -->

??? predict "And the third?"
    A word.

    <!-- notebook-part: print("third") -->

```python
--8<-- "snippets/demo.py:main"
```
"""


def _cut_notebook(tmp_path):
    from fieldguide.notebooks import generate

    (tmp_path / "snippets").mkdir()
    (tmp_path / "snippets" / "demo.py").write_text(SCRIPT)
    (tmp_path / "docs" / "chapter").mkdir(parents=True)
    (tmp_path / "docs" / "chapter" / "page.md").write_text(SCRIPT_PAGE)
    return generate.build(tmp_path, "chapter/page.md", generate.Repo("acme", "guide"))


def test_save_keeps_the_whole_blocks_output_beside_its_parts(tmp_path, monkeypatch):
    """`make outputs` runs the notebook, whose cells are the parts; the page looks its block up
    by the whole block's code: save writes that record too, the parts' outputs merged as one
    cell would have printed them. Checked on the CPU with a fake executed notebook."""
    from fieldguide.measuring import fingerprint

    notebook = _cut_notebook(tmp_path)
    parts = [c for c in notebook["cells"] if outputs.part_of(c)]
    assert [outputs._source(c).split("\n")[0] for c in parts] == [
        'print("first")', "# the second part: its comment goes with it", "if x:"]
    whole = outputs.code_key('print("first")\nx = 2\n# the second part: its comment goes with it'
                             '\nprint("second", x)\n\nif x:\n    print("third")\nx')
    assert {outputs.part_of(c) for c in parts} == {whole}
    assert outputs.blocks(parts) == [SCRIPT.split("[start:main]\n")[1].split("\n# --8<--")[0]]
    printed = [stream("first\n"), stream("second 2\n"),   # as nbclient leaves them: str text
               [{"name": "stdout", "output_type": "stream", "text": "third\n"},
                {"output_type": "execute_result", "data": {"text/plain": "2"},
                 "execution_count": 4, "metadata": {}}]]
    for cell, found in zip(parts, printed, strict=True):
        cell["outputs"] = found
    parts[0]["outputs"].append({"output_type": "execute_result", "data": {"text/plain": "0"},
                                "execution_count": 2, "metadata": {}})  # not shown whole
    monkeypatch.setattr(outputs, "gpu_alone", lambda: None)
    monkeypatch.setattr(fingerprint, "collect", lambda: {
        "gpu_name": "Fake GPU", "gpu_count": 1, "driver": "1", "cuda_runtime": "13.0",
        "torch": "2.13.0", "boot_id": "b"})
    path = outputs.save(notebook, "chapter/page.md", tmp_path / "outputs")
    record = json.loads(path.read_text())
    assert record["alone"] and path.parent.parent.name == "fake-gpu"
    (merged,) = [c for c in record["cells"] if c["code_sha256"] == whole]
    assert merged["parts"] == 3
    assert merged["outputs"] == [
        {"name": "stdout", "output_type": "stream", "text": ["first\n", "second 2\n", "third\n"]},
        {"output_type": "execute_result", "data": {"text/plain": ["2"]}, "execution_count": 4,
         "metadata": {}}]
    recorded = outputs.load("chapter/page.md", "fake-gpu", tmp_path)
    shown = outputs.under_blocks(SCRIPT_PAGE, tmp_path, recorded)
    assert "What this printed on Fake GPU" in shown
    assert "```text\n    first\n    second 2\n    third\n    2\n    ```" in shown
    # and each part's own record fills its cell in the notebook
    for cell in parts:
        assert recorded.outputs_of(outputs._source(cell)) is not None
