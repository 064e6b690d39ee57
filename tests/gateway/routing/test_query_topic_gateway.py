"""Through a running gateway, a learned cascade scores a cheap answer with its question's topic
(policies/scorers/topic.py): answers alike to the letter take different routes when their
questions are about things the scorer learned the cheap tier gets right, or wrong."""

from __future__ import annotations

import random
from collections.abc import Iterator

import httpx
import pytest

from policies.scorers.training import Matrix, train_matrix
from policies.semantic_cache.embedder import Embedder
from tests.support import GatewayProcess, model, recorded_upstream
from tests.topics import ANSWER, BAKING, DRIVING, examples, questions

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

WEAK, STRONG = "topic-weak", "topic-strong"


@pytest.fixture(scope="module")
def asked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayProcess, list[str], list[str]]]:
    workdir = tmp_path_factory.mktemp("gw-topic")
    trained = examples(Embedder(), random.Random(5), 30)  # baking answers wrong, driving ones right
    train_matrix(Matrix.of(trained), folds=1).model.save(workdir / "topic.json")
    seen = {e.item.query for e in trained}
    baking = [q for q in questions(BAKING, random.Random(21), 8) if q not in seen][:4]
    driving = [q for q in questions(DRIVING, random.Random(21), 8) if q not in seen][:4]
    fake = recorded_upstream(
        workdir, [{"prompt": q, "answers": {WEAK: ANSWER, STRONG: "#### 8"}} for q in baking + driving]
    )
    config = {
        "models": [
            model("weak", WEAK, fake.url, "0.6", "0.6", max_retries=0),
            model("strong", STRONG, fake.url, "10", "30", max_retries=0),
        ],
        "cascades": [
            {
                "name": "topical",
                "tiers": ["weak", "strong"],
                "scorer": f"learned:{workdir / 'topic.json'}",
                "adaptive": False,
                "thresholds": [0.5],
                "shadow_rate": 0.0,
            }
        ],
        "cache": {"exact": {"enabled": False}},
    }
    gw = GatewayProcess(config, workdir)
    yield gw, baking, driving
    gw.stop()
    fake.stop()


def test_alike_answers_to_questions_on_different_topics_take_different_routes(
    asked: tuple[GatewayProcess, list[str], list[str]],
) -> None:
    gw, baking, driving = asked
    client = httpx.Client(base_url=gw.url, headers={"authorization": f"Bearer {gw.new_key('team-topic')}"}, timeout=30)

    def served(question: str) -> str:
        r = client.post(
            "/v1/chat/completions", json={"model": "topical", "messages": [{"role": "user", "content": question}]}
        )
        assert r.status_code == 200, r.text
        return r.headers["x-costgate-model"]

    assert [served(q) for q in driving] == ["weak"] * len(driving)  # the cheap answer accepted
    assert [served(q) for q in baking] == ["strong"] * len(baking)  # the same answer escalated
