"""Recorded outputs (fieldguide/outputs.py): a block shows what its code printed on the GPU only
while its code is the code that ran, and a long output starts collapsed."""

from fieldguide import outputs

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
    return outputs.Recorded("fake-gpu", "Fake GPU", "2.13.0", "2026-11-26T00:00:00Z", by_code)


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
    assert '???+ output "What this printed on Fake GPU (2026-11-26, PyTorch 2.13.0)"' in first
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
