"""The figure cache (fieldguide/rendering/figure_cache.py) serves a figure only for the inputs it was drawn
from: the same data and code hit; any change in the data, the drawing code or the function
draws again; an argument it cannot write out in full is never cached."""

from dataclasses import dataclass, field

import pytest

from fieldguide.rendering import figure_cache

pytest.importorskip("matplotlib")  # the code key names matplotlib's version


@dataclass(frozen=True)
class Run:
    id: str
    data: dict


@dataclass
class Bench:
    name: str
    runs: list = field(default_factory=list)
    median: float = 1e-3


@pytest.fixture
def draw(tmp_path):
    calls = []

    def chart(benches, title=None):
        calls.append(title)
        return {"light": f"<svg>{len(calls)}</svg>"}

    def drawn(*args, **kwargs):
        return figure_cache.drawn(tmp_path, chart, *args, **kwargs)

    drawn.calls = calls
    return drawn


def test_the_same_inputs_are_drawn_once(draw):
    run = Run("r1", {"benchmarks": [1, 2], "machine_info": {"gpu": "X"}})
    first = draw([Bench("a", [run])], title="t")
    again = draw([Bench("a", [Run("r1", {"benchmarks": [1, 2], "machine_info": {"gpu": "X"}})])], title="t")
    assert first == again and len(draw.calls) == 1


@pytest.mark.parametrize("changed", [
    lambda: ([Bench("a", [Run("r1", {"benchmarks": [1, 2]})], median=1.0000001e-3)], {"title": "t"}),
    lambda: ([Bench("a", [Run("r1", {"benchmarks": [1, 3]})])], {"title": "t"}),   # the run's data
    lambda: ([Bench("a", [Run("r2", {"benchmarks": [1, 2]})])], {"title": "t"}),   # another run
    lambda: ([Bench("a", [Run("r1", {"benchmarks": [1, 2]})])], {"title": "u"}),   # an option
])
def test_any_change_in_the_data_draws_again(draw, changed):
    draw([Bench("a", [Run("r1", {"benchmarks": [1, 2]})])], title="t")
    args, kwargs = changed()
    draw(args, **kwargs)
    assert len(draw.calls) == 2


def test_a_change_in_the_drawing_code_draws_again(draw, monkeypatch):
    draw([Bench("a")])
    monkeypatch.setattr(figure_cache, "code_key", lambda module: "other code")
    draw([Bench("a")])
    assert len(draw.calls) == 2


def test_the_code_key_covers_the_drawing_code_and_what_it_imports():
    files = {p.name for p in figure_cache.drawing_modules("fieldguide.rendering.roofline")}
    assert {"roofline.py", "charts.py", "timings.py"} <= files  # roofline imports charts, timings
    assert "generate.py" not in files and "render.py" not in files
    assert (figure_cache.code_key("fieldguide.rendering.roofline")
            != figure_cache.code_key("fieldguide.rendering.charts"))


def test_an_argument_it_cannot_write_out_is_never_cached(draw):
    class Opaque:
        pass

    draw([Opaque()])
    draw([Opaque()])
    assert len(draw.calls) == 2
