"""Dollar figures for the dashboard's tiles: short enough for a tile, and never wrong."""

from __future__ import annotations

from decimal import Decimal as D

import pytest

from gateway.dashboard.pages import usd, usd_exact, usd_short


@pytest.mark.parametrize(
    ("amount", "tile", "exact"),
    [
        (D("0"), "$0", "0"),
        (D("0.000000001851851851851852"), "$0.00000000185", "0.000000001851851851851852"),
        (D("0.0123456"), "$0.0123", "0.0123456"),
        (D("0.999"), "$0.999", "0.999"),
        (D("1.005"), "$1.00", "1.005"),  # cents from $1 up (banker's rounding of the half cent)
        (D("99999.994"), "$99,999.99", "99999.994"),
        (D("3703703.7037"), "$3,703,704", "3703703.7037"),  # whole dollars from $100,000
        (D("123456789012.5"), "$123,456,789,012", "123456789012.5"),
    ],
)
def test_tile_figures_round_and_the_tooltip_keeps_every_digit(amount: D, tile: str, exact: str) -> None:
    assert usd_short(amount) == tile and usd_exact(amount) == exact


def test_tables_keep_every_digit_below_a_dollar() -> None:
    assert usd(D("0.000000001851851851851852")) == "$0.000000001851851851851852"
    assert usd_short("not money") == "not money"
