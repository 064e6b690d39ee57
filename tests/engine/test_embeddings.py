"""The bundled embedding model (engine/embeddings.py) through the gateway with the official
openai SDK: OpenAI's embeddings shape in both encodings, list inputs, usage by the model's own
tokenizer, priced from its measured throughput, in the ledger, budget-checked; and its 400s."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import numpy as np
import openai
import pytest

from engine.embeddings import EmbedderSettings, LocalEmbedder
from policies.semantic_cache.embedder import Embedder
from tests.support import GatewayProcess, wait_until

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

TEXTS = ["A cat sits on the mat.", "A kitten is sitting on a rug.", "Quarterly revenue grew by four percent."]


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    gateway = GatewayProcess(
        {
            "models": [
                {
                    "name": "minilm-l6",
                    "provider": "local",
                    "model": "minilm-l6",
                    "engine": {"gpu_hour_usd": "0.10", "rate_evidence_tokens": 16},
                }
            ]
        },
        tmp_path_factory.mktemp("embed-gw"),
    )
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def client(gw: GatewayProcess) -> openai.OpenAI:
    return gw.client(gw.new_key("embed-team"), timeout=60)


@pytest.fixture(scope="module")
def reference() -> Embedder:
    return Embedder(max_tokens=256)


def status(gw: GatewayProcess) -> dict:
    (entry,) = gw.admin("GET", "/admin/engine").json()["data"]
    return entry


def test_embeddings_are_minilm_vectors_with_usage_and_a_measured_price(
    gw: GatewayProcess, client: openai.OpenAI, reference: Embedder
) -> None:
    raw = client.embeddings.with_raw_response.create(model="minilm-l6", input=TEXTS)  # the SDK asks for base64
    answer = raw.parse()
    vectors = np.array([d.embedding for d in answer.data], dtype=np.float32)
    assert [d.index for d in answer.data] == [0, 1, 2] and vectors.shape == (3, 384)
    assert np.allclose(vectors, reference.embed_many(TEXTS), atol=1e-6)  # the bundled model's own vectors
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.3  # a cat is nearer a kitten than revenue
    tokens = sum(len(reference.tokenizer.encode(t).ids) for t in TEXTS)
    assert answer.usage.prompt_tokens == answer.usage.total_tokens == tokens
    engine = status(gw)
    assert engine["measured"] and engine["prompt_tokens_per_s"] > 0 and engine["dimensions"] == 384
    price = Decimal(engine["input_usd_per_mtok"]) / 1_000_000  # $0.10/h / 3600 / measured tokens per s
    expected = Decimal("0.10") / 3600 / Decimal(repr(engine["prompt_tokens_per_s"]))
    assert abs(price - expected) / expected < Decimal("0.001")
    cost = Decimal(raw.headers["x-costgate-cost-usd"])
    assert cost > 0 and abs(cost - tokens * price) <= Decimal("1e-12")
    assert raw.headers["x-costgate-model"] == "minilm-l6"


def test_float_and_base64_encodings_and_a_single_string(client: openai.OpenAI, reference: Embedder) -> None:
    floats = client.embeddings.create(model="minilm-l6", input=TEXTS[0], encoding_format="float")
    packed = client.embeddings.create(model="minilm-l6", input=[TEXTS[0]], encoding_format="base64", dimensions=384)
    unpacked = np.frombuffer(base64.b64decode(packed.data[0].embedding), dtype="<f4")  # asked for, not decoded
    assert len(floats.data) == 1 and floats.data[0].embedding == unpacked.tolist()
    assert np.allclose(floats.data[0].embedding, reference.embed(TEXTS[0]), atol=1e-6)


def test_every_call_is_in_the_ledger(gw: GatewayProcess, client: openai.OpenAI) -> None:
    def row() -> dict | None:
        return next((r for r in gw.spend("model")["rows"] if r["group"] == "minilm-l6"), None)

    before = row()
    raw = client.embeddings.with_raw_response.create(model="minilm-l6", input=["ledger " + str(time.time())])

    def counted() -> dict | None:  # the row once it counts the call: the ledger is written in batches
        after = row()
        return after if after is not None and after["requests"] != (before or {"requests": 0})["requests"] else None

    after = wait_until(counted, timeout=30, interval=0.05, what="the call reaches the ledger")
    spent = Decimal(after["cost_usd"]) - Decimal((before or {"cost_usd": "0"})["cost_usd"])
    assert spent == Decimal(raw.headers["x-costgate-cost-usd"]) and after["prompt_tokens"] > 0


def test_a_budget_that_cannot_cover_the_call_refuses_it(gw: GatewayProcess) -> None:
    key = gw.new_key("embed-poor")
    budget = gw.admin(
        "PUT",
        "/admin/budgets",
        json={"scope": "team", "id": "embed-poor", "amount_usd": "0.000000000001", "period": "total"},
    )
    assert budget.status_code == 200, budget.text
    with pytest.raises(openai.APIStatusError) as refused:
        gw.client(key).embeddings.create(model="minilm-l6", input=TEXTS)
    assert refused.value.status_code == 402


@pytest.mark.parametrize(
    ("call", "param", "says"),
    [
        (dict(input=[[101, 2023, 102]]), "input", "takes text input"),
        (dict(input=["fine", ""]), "input", "empty strings"),
        (dict(input=TEXTS, dimensions=128), "dimensions", "384-dimensional"),
    ],
)
def test_what_the_model_cannot_do_is_a_400(client: openai.OpenAI, call: dict, param: str, says: str) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        client.embeddings.create(model="minilm-l6", **call)
    assert refused.value.param == param and says in refused.value.message


def test_chat_to_an_embedding_model_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="minilm-l6", messages=[{"role": "user", "content": "hi"}])
    assert "is an embedding model: use POST /v1/embeddings" in refused.value.message


async def test_the_price_follows_measured_throughput() -> None:
    embedder = LocalEmbedder(
        EmbedderSettings.parse({"gpu_hour_usd": "3.6", "tokens_per_second": 1e9, "rate_evidence_tokens": 1})
    )
    assert embedder.price().input == Decimal("0.000000000001")  # the prior: $0.001/s at 1e9 tok/s
    done = await embedder.embed(TEXTS)
    assert done.vectors.shape == (3, 384) and all(t > 2 for t in done.tokens)
    assert embedder.rate.measured and embedder.rate.rate < 1e9  # a real CPU is slower than the prior
    assert embedder.price().input > Decimal("0.000000000001") and embedder.price().output == 0
    embedder.close()


@pytest.mark.parametrize("raw", [{"colour": 1}, {"max_tokens": 1000}, {"gpu_hour_usd": -1}, {"rate_weight": 0}])
def test_bad_embedder_settings_are_refused(raw: dict) -> None:
    with pytest.raises(ValueError):
        EmbedderSettings.parse(raw)


def test_the_sample_config_names_the_bundled_embedding_model() -> None:
    from gateway.config.settings import load_settings
    from tests.support import ROOT

    names = {m.name: m for m in load_settings(Path(ROOT) / "costgate.example.yaml", {}).models}
    assert names["minilm-l6"].provider == "local" and names["minilm-l6"].model == "minilm-l6"
