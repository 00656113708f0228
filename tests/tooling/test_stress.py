"""The stress check (`make stress`, tests/stress.py): failures are counted by their cause, read
from what the failed launch printed; the cases are every way the suite starts a local group."""

from tests import stress


def test_a_failure_is_named_by_its_cause():
    gloo = ("RuntimeError: Gloo connectFullMesh failed with [.../gloo/transport/tcp/pair.cc:553] "
            "Connection closed by peer [127.0.0.1]:36057. This is typically caused by a remote "
            "worker crashing.")
    assert stress.cause_of(gloo) == "gloo connectFullMesh: connection closed by peer"
    assert stress.cause_of("hung: still running after 120 s\nRendezvous...") == "hung"
    assert stress.cause_of("DistNetworkError: ... EADDRINUSE ...") == "port taken (address already in use)"
    assert stress.cause_of("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError") \
        == "rendezvous failed"
    assert stress.cause_of("Traceback ...\nValueError: something else\n  done") \
        == "other: ValueError: something else"


def test_every_way_the_suite_starts_a_group_is_a_case():
    assert set(stress.CASES) == {"exercises-fork", "exercises-spawn", "torchrun-2", "torchrun-4",
                                 "two-nodes", "pair-cpu", "ranks-4-cpu", "slurm-cluster",
                                 "slurm-job"}


def test_every_case_names_the_files_it_launches_and_its_record_keys_them():
    """A record counts towards a case's total only while these files are unchanged (the guide's
    table): each case names files that exist, and its key changes with any of them."""
    from fieldguide import ROOT
    from fieldguide.rendering.loop_results import code_key

    assert set(stress.CASE_FILES) == set(stress.CASES)
    for name, files in stress.CASE_FILES.items():
        assert files and all((ROOT / path).is_file() for path in files), name
        code = stress.case_code(name)
        assert code["files"] == files
        changed = code_key(files, lambda path: (ROOT / path).read_bytes() + b"#")
        assert changed != code["key"]


def test_streams_of_one_case_add_up_to_one_result():
    parts = [{"launches": 50, "failures": 1, "causes": {"hung": 1}, "examples": {"hung": "a"},
              "s_per_launch": 2.0},
             {"launches": 50, "failures": 2, "causes": {"hung": 1, "connection refused": 1},
              "examples": {"hung": "b", "connection refused": "c"}, "s_per_launch": 3.0},
             {"launches": 50, "failures": 0, "causes": {}, "examples": {}, "s_per_launch": 2.5}]
    assert stress.merge_streams(parts, 3) == {
        "launches": 150, "failures": 3, "causes": {"hung": 2, "connection refused": 1},
        "examples": {"hung": "a", "connection refused": "c"}, "streams": 3, "s_per_launch": 2.5}
    skipped = {"skipped": "Slurm is not installed (make slurm)"}
    assert stress.merge_streams([skipped, skipped], 2) == skipped
    parts[1]["cut_short_of"] = 60  # a stream whose time was up after 50 of its 60 launches
    assert stress.merge_streams(parts, 3)["cut_short_of"] == 160


def test_no_launch_starts_after_the_time_is_up():
    import time

    said = []
    assert stress.stress(["exercises-fork", "torchrun-2"], 5, log=said.append,
                         until=time.monotonic()) == {}
    assert said == ["exercises-fork: no launch started before the time was up",
                    "torchrun-2: no launch started before the time was up"]


def test_one_run_of_the_exercises_case_launches_it_scale_times_passes_and_is_recorded(
        tmp_path, monkeypatch):
    """At a scale of 2, not the 20 launches per run that `make stress` makes of it: what this
    checks is the counting and the record, not the race (which takes hundreds of launches)."""
    monkeypatch.setattr(stress, "SCALE", {"exercises-fork": 2})
    found = stress.stress(["exercises-fork"], 1, log=lambda line: None)
    assert found["exercises-fork"]["launches"] == 2
    assert found["exercises-fork"]["failures"] == 0
    stress.record({"phases": {"alone": found}}, tmp_path / "stress.json")
    stress.record({"phases": {}}, tmp_path / "stress.json")
    import json

    assert len(json.loads((tmp_path / "stress.json").read_text())["runs"]) == 2


def test_a_reserved_port_is_handed_to_no_one_else_and_its_user_can_listen_on_it():
    """tests.helpers.reserved_port, which the two-nodes and Slurm tests hand to torchrun's
    rendezvous and to Slurm's daemons: while it is held, the OS gives the port to no program that
    asks for a free one, and a TCPStore (SO_REUSEADDR, as Slurm's daemons bind) can listen on it;
    a second listener cannot."""
    import datetime
    import socket

    import pytest
    import torch.distributed as dist

    from tests.helpers import reserved_port

    with reserved_port() as port:
        handed_out = set()
        for _ in range(2000):
            with socket.socket() as other:
                other.bind(("127.0.0.1", 0))
                handed_out.add(other.getsockname()[1])
        assert port not in handed_out
        store = dist.TCPStore("127.0.0.1", port, 1, is_master=True,
                              timeout=datetime.timedelta(seconds=10))
        assert store.port == port
        with pytest.raises(dist.DistNetworkError):
            dist.TCPStore("127.0.0.1", port, 1, is_master=True,
                          timeout=datetime.timedelta(seconds=10))
