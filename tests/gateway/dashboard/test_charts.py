"""The dashboard's chart arithmetic and markup, as tables."""

from __future__ import annotations

from decimal import Decimal as D

import pytest

from gateway.dashboard.budget_view import budget_rows
from gateway.dashboard.charts import Series, fraction, meter, nice_ceiling, stacked_bars, top_series


@pytest.mark.parametrize(
    "value, expected",
    [
        (D(0), D(1)),
        (D("-3"), D(1)),
        (D("0.0003"), D("0.0005")),
        (D("0.001"), D("0.001")),
        (D("0.0011"), D("0.002")),
        (D("3.2"), D(5)),
        (D(5), D(5)),
        (D("5.01"), D(10)),
        (D(99), D(100)),
        (D(120), D(200)),
        (D(999), D(1000)),
    ],
)
def test_nice_ceiling(value: D, expected: D) -> None:
    assert nice_ceiling(value) == expected


@pytest.mark.parametrize(
    "used, limit, expected",
    [
        (D(0), D(10), 0.0),
        (D(5), D(10), 0.5),
        (D(10), D(10), 1.0),
        (D(15), D(10), 1.0),
        (D(-1), D(10), 0.0),
        (D(0), D(0), 0.0),
        (D("0.01"), D(0), 1.0),
    ],
)
def test_fraction(used: D, limit: D, expected: float) -> None:
    assert fraction(used, limit) == expected


def test_top_series_keeps_the_largest_and_sums_the_rest() -> None:
    series = [
        Series("a", (D(1), D(1))),
        Series("b", (D(5), D(0))),
        Series("c", (D(0), D(2))),
        Series("d", (D(3), D(3))),
    ]
    kept = top_series(series, 2)
    assert [s.name for s in kept] == ["d", "b", "other"]
    assert kept[-1].values == (D(1), D(3))
    assert top_series(series, 4) == sorted(series, key=lambda s: -sum(s.values))


def test_stacked_bars_escape_names_and_scale_to_the_largest_day() -> None:
    svg = stacked_bars(["2026-11-01", "2026-11-02"], [Series("<script>x</script>", (D(1), D(3)))], title="t&t")
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "t&amp;t" in svg
    assert svg.count("<rect") == 3  # two bars and one legend swatch
    assert "$5.00" in svg  # axis top: the nice ceiling of the largest day ($3)


def test_meter_lays_spent_then_reserved_and_clamps_at_the_limit() -> None:
    svg = meter([("spent", D(6), "spent"), ("reserved", D(6), "reserved")], D(10), width=100)
    assert 'width="60.0" height="16" class="spent"' in svg
    assert 'x="60.0" y="0" width="40.0" height="16" class="reserved"' in svg  # clamped: 100, not 120


def test_budget_rows_name_teams_and_order_by_use() -> None:
    body = {
        "data": [
            {
                "scope": "team",
                "id": "bdg_1",
                "subject": "team_1",
                "amount_usd": "10",
                "period": "monthly",
                "spent_usd": "2",
                "reserved_usd": "0",
            },
            {
                "scope": "user",
                "id": "bdg_2",
                "subject": "bob",
                "amount_usd": "1",
                "period": "daily",
                "spent_usd": "0.9",
                "reserved_usd": "0.2",
            },
        ]
    }
    rows = budget_rows(body, {"team_1": "search"})
    assert [(r.subject, r.level) for r in rows] == [("bob", "over"), ("search", "ok")]
    assert rows[1].used == 0.2 and rows[0].used == 1.0


def test_a_learning_curve_draws_each_series_and_skips_missing_points() -> None:
    from gateway.dashboard.charts import curve_lines
    from gateway.dashboard.views import learning_chart

    assert curve_lines([], ("a",)) == ""
    svg = learning_chart(
        [
            {"requests": 5, "cost_ratio": 1.02, "quality": 1.0, "quality_lower_bound": 1.0},
            {"requests": 10, "cost_ratio": 0.8, "quality": None, "quality_lower_bound": None},
            {"requests": "bad"},
        ]
    )
    assert svg.count("<polyline") == 3 and "over 10 requests" in svg
    assert "cost vs last tier" in svg and "quality lower bound" in svg
    unsafe = curve_lines([(1.0, (0.5,))], ("<script>",))
    assert "<script>" not in unsafe and "&lt;script&gt;" in unsafe
