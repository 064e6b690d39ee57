"""What a cascade counts (gateway/routing/cascade_services.py): its learning curve's marks."""

from __future__ import annotations

from gateway.routing.cascade_services import MAX_CURVE_POINTS, Tally, on_curve


def test_the_learning_curve_marks_the_first_requests_densely_and_stays_bounded() -> None:
    marked = [n for n in range(1, 400) if on_curve(n)]
    assert marked[:3] == [5, 10, 15] and 60 in marked and 65 not in marked and 350 in marked
    tally = Tally()
    assert sum(on_curve(n) for n in range(1, 10**6)) > MAX_CURVE_POINTS  # the cap is what bounds it
    tally.mark("learning", None, 1.0, 1.0)  # nothing answered yet: no point
    assert tally.curve == []
