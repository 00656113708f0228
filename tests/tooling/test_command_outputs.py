"""Recorded outputs of shell commands (fieldguide/notebooks/outputs.py,
fieldguide/notebooks/record_commands.py): a declared bash block shows what it printed only while its text and
its files are what ran."""

import json

import pytest

from fieldguide.notebooks import outputs, record_commands

PAGE = "chapter/page.md"
MARKDOWN = """# P

```bash title="hello"
echo hi; command -v torchrun >/dev/null && echo shim; cat data.txt
```

<!-- command-output: gpus=0 data.txt=snippets/data.txt -->

Text.

```bash title="on two"
echo two
```

<!-- command-output: gpus=2 -->
"""


@pytest.fixture
def root(tmp_path):
    (tmp_path / "snippets").mkdir()
    (tmp_path / "snippets" / "data.txt").write_text("from the file\n")
    (tmp_path / "docs" / "chapter").mkdir(parents=True)
    (tmp_path / "docs" / PAGE).write_text(MARKDOWN)
    return tmp_path


def test_a_declaration_names_the_block_above_it_its_gpus_and_its_files(root):
    (first_line, first), (_, second) = outputs.commands(MARKDOWN, PAGE, root)
    assert MARKDOWN.split("\n")[first_line].startswith("<!-- command-output: gpus=0")
    assert first.block.startswith("echo hi;") and first.gpus == 0
    assert first.files == {"data.txt": "snippets/data.txt"}
    assert second.block == "echo two" and second.gpus == 2 and second.files == {}


def test_a_declared_file_that_does_not_exist_is_an_error_naming_the_page(root):
    with pytest.raises(ValueError, match=r"docs/chapter/page.md, line 7: .*snippets/gone.py"):
        outputs.commands(MARKDOWN.replace("snippets/data.txt", "snippets/gone.py"), PAGE, root)
    with pytest.raises(ValueError, match="under no code block"):
        outputs.commands("Text.\n\n<!-- command-output: gpus=1 -->\n", PAGE, root)


def test_the_key_changes_with_the_files_bytes_and_the_block(root):
    before = outputs.commands(MARKDOWN, PAGE, root)[0][1].key
    (root / "snippets" / "data.txt").write_text("changed\n")
    after = outputs.commands(MARKDOWN, PAGE, root)[0][1].key
    assert before != after
    assert outputs.commands(MARKDOWN.replace("echo hi", "echo ho"), PAGE, root)[0][1].key != after


def _record(root, entries, slug="2x-fake-gpu", **fields):
    path = root / "outputs" / slug / outputs.commands_path(PAGE)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"page": PAGE, "gpu": "Fake GPU", "gpu_count": 2, "torch": "2.13.0",
              "date": "2026-11-28T00:00:00Z", "cpu_threads": 32, "alone": True,
              "commands": entries, **fields}
    path.write_text(json.dumps(record))


def test_without_a_record_the_declaration_goes_and_nothing_is_shown(root):
    shown = outputs.under_commands(MARKDOWN, PAGE, root)
    assert "command-output" not in shown and "output" not in shown
    assert "echo two\n```" in shown


def test_a_recorded_command_shows_its_stdout_under_the_gpus_it_ran_on(root):
    key = outputs.commands(MARKDOWN, PAGE, root)[1][1].key
    _record(root, [{"key": key, "stdout": "two\n", "stderr": "a warning\n", "returncode": 0}])
    shown = outputs.under_commands(MARKDOWN, PAGE, root)
    assert ('???+ output "What this printed on 2 × Fake GPU (the GPUs to itself, 32 CPU threads; '
            'PyTorch 2.13.0, 2026-11-28)"') in shown
    assert "    two\n" in shown and "a warning" not in shown and "command-output" not in shown
    assert shown.index("echo two") < shown.index("    two\n")


def test_a_failed_command_shows_its_stderr_and_exit_code(root):
    key = outputs.commands(MARKDOWN, PAGE, root)[1][1].key
    _record(root, [{"key": key, "stdout": "two\n", "stderr": "Boom\n", "returncode": 1}])
    shown = outputs.under_commands(MARKDOWN, PAGE, root)
    assert "    Boom\n" in shown and "exit code 1" in shown


def test_a_stale_or_not_alone_record_is_shown_nowhere(root):
    key = outputs.commands(MARKDOWN, PAGE, root)[0][1].key
    _record(root, [{"key": key, "stdout": "hi\n", "stderr": "", "returncode": 0}])
    assert "What this printed" in outputs.under_commands(MARKDOWN, PAGE, root)
    (root / "snippets" / "data.txt").write_text("changed\n")  # the file the command reads
    assert "What this printed" not in outputs.under_commands(MARKDOWN, PAGE, root)
    (root / "snippets" / "data.txt").write_text("from the file\n")
    _record(root, [{"key": key, "stdout": "hi\n", "stderr": "", "returncode": 0}], alone=False)
    assert "What this printed" not in outputs.under_commands(MARKDOWN, PAGE, root)


def fake_machine(count=0):
    return {"gpu_name": "Fake GPU", "gpu_count": count, "torch": "2.13.0", "driver": "1",
            "boot_id": "b"}


def test_the_recorder_refuses_beside_another_process_on_the_gpu(root, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.setattr(outputs, "_nvidia_smi", lambda *query: ["4242"])
    monkeypatch.setattr(record_commands.fingerprint, "collect", fake_machine)
    assert record_commands.main([f"docs/{PAGE}"], root=root) == 2
    assert not (root / "outputs").exists()


def test_the_recorder_writes_nothing_when_the_gpu_was_shared_after_the_command(root, monkeypatch):
    calls = []

    def alone():
        calls.append(1)
        if len(calls) == 3:  # after the command
            raise outputs.NotAlone("pid 4242")

    monkeypatch.setattr(outputs, "gpu_alone", alone)
    monkeypatch.setattr(record_commands.fingerprint, "collect", fake_machine)
    assert record_commands.main([f"docs/{PAGE}"], root=root) == 2
    assert not (root / "outputs").exists()


def test_the_recorder_runs_each_block_it_can_and_records_it(root, monkeypatch, capsys):
    monkeypatch.setattr(outputs, "gpu_alone", lambda: None)
    monkeypatch.setattr(record_commands.fingerprint, "collect", fake_machine)
    failing = MARKDOWN.replace("cat data.txt", "cat data.txt; echo oops >&2; exit 3")
    (root / "docs" / PAGE).write_text(failing)
    assert record_commands.main([f"docs/{PAGE}"], root=root) == 0
    said = capsys.readouterr().out
    assert "needs 2 GPUs" in said and "exit code 3" in said
    path = root / "outputs" / "fake-gpu" / outputs.commands_path(PAGE)
    record = json.loads(path.read_text())
    assert record["alone"] is True and record["gpu"] == "Fake GPU"
    (entry,) = record["commands"]
    assert entry["stdout"] == "hi\nshim\nfrom the file\n" and entry["stderr"] == "oops\n"
    assert entry["returncode"] == 3
    shown = outputs.under_commands(failing, PAGE, root)
    assert "    from the file\n" in shown and "    oops\n" in shown and "exit code 3" in shown
    assert record_commands.main([f"docs/{PAGE}"], root=root) == 0  # nothing new: skipped
    assert "recorded on fake-gpu already" in capsys.readouterr().out
