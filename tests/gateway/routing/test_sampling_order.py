"""A cascade's samples reach the store in the order they were recorded (gateway/routing/sampling.py):
a refit holds back the latest rows and folds the rest by their order, so that order must be the
controller's, not whichever of several concurrent inserts committed first."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace

from gateway.routing.confidence import TierAnswer
from gateway.routing.sampling import Sampling
from gateway.storage.cascade_samples import SampleRecord
from policies.scorers import Scored


class SlowFirstStore:
    """A store whose first insert takes longest, as a busy connection's would."""

    def __init__(self, delays: list[float]) -> None:
        self.delays = delays
        self.rows: list[str] = []

    async def add(self, record: SampleRecord) -> None:
        await asyncio.sleep(self.delays.pop(0))
        self.rows.append(record.request_id)


class Controller:
    def __init__(self) -> None:
        self.added: list[float] = []

    def add(self, *samples) -> None:
        self.added.extend(s.weight for s in samples)


def answer(text: str) -> TierAnswer:
    return TierAnswer(0, None, {}, b"", Scored("what is 2 + 2?", text, "stop"), 0.5)  # type: ignore[arg-type]


async def test_samples_are_stored_in_the_order_they_were_recorded() -> None:
    store = SlowFirstStore([0.05, 0.02, 0.0, 0.0])
    controller = Controller()
    slot = SimpleNamespace(current=SimpleNamespace(controller=controller))
    services = SimpleNamespace(store=store, log_prompts=False)
    learned: list[str] = []
    learner = SimpleNamespace(sampled=lambda request_id, sample, vectors: learned.append(request_id))
    sampling = Sampling("auto", [], None, slot, services, random.Random(0), None, learner)  # type: ignore[arg-type]

    ids = ["r1", "r2", "r3", "r4"]
    await asyncio.gather(*(sampling.record(i, [answer("4")], "4", weight=n + 1.0) for n, i in enumerate(ids)))

    assert controller.added == [1.0, 2.0, 3.0, 4.0]
    assert store.rows == ids  # without the order kept: r3, r4, r2, r1
    assert learned == ids
