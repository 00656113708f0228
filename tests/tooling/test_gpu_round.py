"""`make gpu-round` (fieldguide/measuring/gpu_round.py): steps start only while the call's budget has room,
it says what it did, and its archive holds what it wrote."""

import tarfile

import pytest

from fieldguide.measuring import gpu_round


def test_an_unknown_step_is_refused(capsys):
    with pytest.raises(SystemExit):
        gpu_round.main(["--steps", "timings,bench"])
    assert "unknown step(s) bench" in capsys.readouterr().err


def test_no_timing_pass_starts_without_room_for_its_last_module(tmp_path, monkeypatch, capsys):
    started = []
    monkeypatch.setattr(gpu_round, "_run", lambda command, log, env=None: started.append(command))
    assert gpu_round.main(["--steps", "timings", "--budget", str(gpu_round.RESERVE - 1),
                           "--log", str(tmp_path / "round.log")]) == 0
    assert started == []
    assert "timings pass 1: not started" in capsys.readouterr().out


def test_passes_repeat_until_nothing_is_wanted_and_the_archive_holds_what_was_written(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gpu_round, "ROOT", tmp_path)
    folder = tmp_path / "timings" / "fake-gpu"
    folder.mkdir(parents=True)
    answers = iter(["wrote 3 benchmark(s) to timings/fake-gpu/a.json in 1.0 s\n",
                    "wrote 1 benchmark(s) to timings/fake-gpu/b.json in 1.0 s\n",
                    "nothing to measure: fake-gpu has 3 runs from 2 leases\n"])
    commands = []

    def fake_run(command, log, env=None):
        commands.append(command)
        text = next(answers)
        if text.startswith("wrote"):
            (folder / text.split("/")[-1].split()[0]).write_text("{}")
        return 0, text

    monkeypatch.setattr(gpu_round, "_run", fake_run)
    archive = tmp_path / "round.tar.gz"
    assert gpu_round.main(["--steps", "timings", "--budget", "1000", "--archive", str(archive),
                           "--log", "round.log"]) == 0
    assert len(commands) == 3 and all("--wanted" in c and "--deadline" in c for c in commands)
    out = capsys.readouterr().out
    assert "timings: nothing left to measure after 2 pass(es)" in out
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == ["round.log", "timings/fake-gpu/a.json",
                                          "timings/fake-gpu/b.json"]
