"""Priority classes and replica admission: the bookkeeping alone, as tables."""

from __future__ import annotations

import pytest

from engine.admission import AdmissionPolicy, LoadBook, Priority, parse_priority, resolve_priority

R, INTER, B = Priority.REALTIME, Priority.INTERACTIVE, Priority.BATCH


@pytest.mark.parametrize(
    "asked, plan, expected",
    [
        (None, "pro", INTER),
        (None, "enterprise", INTER),
        (None, "free", B),  # free keys fill idle capacity by default
        ("", "free", B),
        ("realtime", "pro", R),
        ("REALTIME", "enterprise", R),
        ("realtime", "free", INTER),  # capped at the free plan's ceiling
        ("interactive", "free", INTER),
        ("batch", "pro", B),  # asking for less is always allowed
        ("batch", "enterprise", B),
        (" interactive ", "pro", INTER),
        ("realtime", "unknown-plan", R),
        (None, "unknown-plan", INTER),
    ],
)
def test_resolve_priority(asked: str | None, plan: str, expected: Priority) -> None:
    assert resolve_priority(asked, plan) is expected


@pytest.mark.parametrize("value", ["urgent", "0", "batchy", "real time"])
def test_unknown_priority_is_refused(value: str) -> None:
    with pytest.raises(ValueError):
        parse_priority(value)


def test_vllm_priority_values_order_classes() -> None:
    # vLLM runs lower values first; interactive is vLLM's default 0
    assert int(R) < int(INTER) == 0 < int(B)


def book(
    loads: list[dict[Priority, int]], policy: AdmissionPolicy = AdmissionPolicy(), down: dict[int, float] | None = None
) -> LoadBook:
    b = LoadBook([f"r{i}" for i in range(len(loads))], policy)
    for i, load in enumerate(loads):
        for p, tokens in load.items():
            b.admit(i, p, tokens)
    for i, until in (down or {}).items():
        b.replicas[i].down_until = until
    return b


@pytest.mark.parametrize(
    "loads, down, exclude, expected",
    [
        ([{}, {}], {}, set(), 0),  # tie: the first
        ([{INTER: 100}, {}], {}, set(), 1),  # fewest outstanding tokens
        ([{INTER: 100}, {B: 50}, {R: 80}], {}, set(), 1),  # every class counts
        ([{}, {INTER: 10}], {0: 10.0}, set(), 1),  # a down replica is skipped
        ([{}, {INTER: 10}], {0: 1.0}, set(), 0),  # its cooldown is over (now = 5)
        ([{INTER: 10}, {}], {}, {1}, 0),  # already tried: excluded
        ([{}, {}], {}, {0, 1}, None),  # every replica tried
        ([{}, {}], {0: 30.0, 1: 20.0}, set(), 1),  # all down: the one back soonest
    ],
)
def test_choose_replica(loads, down, exclude, expected) -> None:
    assert book(loads, down=down).choose(now=5.0, exclude=frozenset(exclude)) == expected


POLICY = AdmissionPolicy(batch_idle_tokens=100, batch_max_tokens=1000)


@pytest.mark.parametrize(
    "loads, priority, tokens, expected",
    [
        ([{INTER: 5000}, {R: 5000}], INTER, 10, True),  # foreground is never held back here
        ([{INTER: 5000}], R, 10, True),
        ([{}, {}], B, 10, True),  # idle: batch runs
        ([{INTER: 100}, {INTER: 100}], B, 10, True),  # at the level (100 per replica): still idle enough
        ([{INTER: 201}, {}], B, 10, False),  # above it: batch waits
        ([{R: 150}, {INTER: 60}], B, 10, False),  # realtime and interactive both count
        ([{B: 1900}, {}], B, 100, True),  # batch cap is per replica: 2000 for two
        ([{B: 1950}, {}], B, 100, False),  # would pass the cap
        ([{}], B, 50_000, True),  # a lone batch request always fits
        ([{B: 1}], B, 50_000, False),
    ],
)
def test_batch_admission(loads, priority, tokens, expected) -> None:
    assert book(loads, POLICY).may_admit(priority, tokens, now=0.0) is expected


def test_batch_level_counts_only_live_replicas() -> None:
    b = book([{INTER: 150}, {}], POLICY, down={1: 10.0})
    assert not b.may_admit(B, 1, now=0.0)  # one live replica: 150 > 100
    assert b.may_admit(B, 1, now=11.0)  # both live again: 150 <= 200


def test_release_returns_tokens_and_refuses_double_release() -> None:
    b = book([{}, {}])
    t1, t2 = b.admit(0, INTER, 300), b.admit(1, B, 200)
    assert (b.replicas[0].tokens, b.replicas[1].tokens) == (300, 200)
    b.release(t1)
    assert b.load(INTER) == 0 and b.load(B) == 200
    with pytest.raises(ValueError):
        b.release(t1)
    b.release(t2)
    assert b.load(*Priority) == 0


def test_mark_down_and_up() -> None:
    b = book([{}, {}], AdmissionPolicy(cooldown_s=5))
    b.mark_down(0, now=100.0)
    assert b.choose(now=101.0) == 1 and b.live_count(101.0) == 1
    assert b.choose(now=105.0) == 0
    b.mark_down(0, now=200.0)
    b.mark_up(0)
    assert b.choose(now=200.0) == 0
