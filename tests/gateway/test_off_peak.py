"""DeepSeek sells its models at about half price 16 hours of a weekday and all weekend (litellm's
`off_peak_pricing`). The ledger charged the peak price at every hour: twice the bill most of the
week. Now a call is charged the price of the hour it is billed in, and the off-peak saving is
the provider's discount (`provider_tier_saved`); the hold stays at the peak price, the most it
can cost."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import httpx

from policies.price_map import lookup
from policies.pricing import Usage, bill, from_pico
from tests.gateway.in_process import chat_answer, ledger_rows, new_key, openai_client, running_app, settings_for

DEEPSEEK = {"name": "deepseek", "provider": "openai", "model": "deepseek-v4-pro", "api_base": "http://upstream.test/v1"}


async def test_a_call_is_charged_the_price_of_the_hour_it_is_billed_in(tmp_path: Path) -> None:
    transport = httpx.MockTransport(lambda _: httpx.Response(200, json=chat_answer(prompt=10_000, completion=500)))
    listed = lookup("deepseek-v4-pro")
    assert listed is not None and listed.price.off_peak is not None
    async with running_app(settings_for(tmp_path, [DEEPSEEK]), transport) as app:
        key = await new_key(app)
        before = datetime.now(UTC)
        answer = await openai_client(app, key).chat.completions.with_raw_response.create(
            model="deepseek", messages=[{"role": "user", "content": "hi"}]
        )
        after = datetime.now(UTC)
        rows = await ledger_rows(app)
    usage = Usage(10_000, 500)
    peak, off_peak = bill(usage, listed.price).cost, bill(usage, listed.price.off_peak.price).cost
    assert off_peak < peak  # $0.00759 against $0.01518 here
    charged = Decimal(answer.headers["x-costgate-cost-usd"])
    hours = {listed.price.off_peak.covers(moment) for moment in (before, after)}
    assert charged in ({off_peak} if hours == {True} else {peak} if hours == {False} else {peak, off_peak})
    (row,) = rows
    assert from_pico(row["cost_pusd"]) == charged
    assert from_pico(row["provider_tier_saved_pusd"]) == peak - charged  # the discount, recorded apart
