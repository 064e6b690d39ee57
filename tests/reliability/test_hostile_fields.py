"""Issue 16, item 1: no request field makes the gateway send the provider key — or anything —
to a host the client chooses.

Attacked as a hostile team would, through the running gateway: a real socket listener stands
where the attacker's host would be, and must see no connection, while requests (raw HTTP and
the official SDK, streamed and not) carry every keyword argument litellm reads
(tests/litellm_kwargs.py derives them from litellm's own source), each set to the listener's
URL or to a value that steers litellm there: `fallbacks` with its `api_base` and a null key,
model lists, callbacks with their hosts. The litellm model's upstream fails every call, so
litellm would try fallbacks if it were given any. The provider key is also in the gateway's
environment (`OPENAI_API_KEY`), where litellm looks when a call's key is null.
"""

from __future__ import annotations

import secrets
import socket
import threading
from collections.abc import Iterator
from urllib.parse import unquote

import httpx
import openai
import pytest

from gateway.core.request_fields import DROPPED_HEADER, LITELLM_READS, OPENAI_FIELDS
from tests.litellm_kwargs import hostile_value, litellm_kwargs
from tests.support import FakeUpstream, GatewayProcess, model

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

PROVIDER_KEY = "sk-provider-" + secrets.token_hex(16)
HI = [{"role": "user", "content": "hi"}]


class Listener:
    """A TCP server that must never be reached: it keeps the first bytes of every connection."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.received: list[bytes] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return  # closed
            with conn:
                conn.settimeout(2)
                try:
                    self.received.append(conn.recv(65536) or b"<connected, sent nothing>")
                except OSError:
                    self.received.append(b"<connected, sent nothing>")

    def close(self) -> None:
        self.server.shutdown(socket.SHUT_RDWR)  # wakes the accept()
        self.server.close()
        self._thread.join(10)


@pytest.fixture(scope="module")
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


@pytest.fixture(scope="module")
def gw(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream, listener: Listener
) -> Iterator[GatewayProcess]:
    key = "env:COSTGATE_TEST_PROVIDER_KEY"
    litellm = {"provider": "litellm", "api_key": key, "max_retries": 0}
    models = [
        model("failing", "fail-500", fake_upstream.url) | litellm | {"model": "openai/fail-500"},
        model("working", "echo-ok", fake_upstream.url) | litellm | {"model": "openai/echo-ok"},
    ]
    gateway = GatewayProcess(
        {"models": models, "breaker": {"enabled": False}},  # every call must reach litellm
        tmp_path_factory.mktemp("gw-hostile"),
        env={"COSTGATE_TEST_PROVIDER_KEY": PROVIDER_KEY, "OPENAI_API_KEY": PROVIDER_KEY},
    )
    yield gateway
    gateway.stop()
    # Callbacks run after the answer: only once the process is gone has everything had its chance.
    assert listener.received == [], listener.received


@pytest.fixture(scope="module")
def key(gw: GatewayProcess) -> str:
    return gw.new_key("attackers")


def steering_names(openai_fields: frozenset[str] = OPENAI_FIELDS["chat.completions"]) -> list[str]:
    """litellm's keyword arguments, but OpenAI's fields (those go upstream as meant)."""
    return sorted(litellm_kwargs() - (openai_fields - LITELLM_READS))


def assert_nothing_leaked(listener: Listener, text: str, headers: httpx.Headers | dict, what: str) -> None:
    assert listener.received == [], f"{what}: the listener was reached: {listener.received[:1]}"
    assert PROVIDER_KEY not in text and PROVIDER_KEY not in str(headers), f"{what}: the provider key leaked"


def post(client: httpx.Client, path: str, body: dict, stream: bool) -> tuple[int, str, httpx.Headers]:
    if not stream:
        r = client.post(path, json=body)
        return r.status_code, r.text, r.headers
    with client.stream("POST", path, json={**body, "stream": True}) as r:
        return r.status_code, r.read().decode(), r.headers


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_no_litellm_keyword_argument_reaches_litellm(
    gw: GatewayProcess, key: str, listener: Listener, stream: bool
) -> None:
    """Each of litellm's keyword arguments alone, so none can hide behind another's error."""
    names = steering_names()
    assert {
        "fallbacks",
        "model_list",
        "api_base",
        "base_url",
        "api_key",
        "callbacks",
        "success_callback",
        "langfuse_host",
        "s3_endpoint_url",
        "custom_llm_provider",
        "extra_headers",
    } <= set(names)
    with httpx.Client(base_url=gw.url, headers={"authorization": f"Bearer {key}"}, timeout=60) as client:
        for name in names:
            body = {"model": "failing", "messages": HI, name: hostile_value(name, listener.url)}
            status, text, headers = post(client, "/v1/chat/completions", body, stream)
            assert_nothing_leaked(listener, text, headers, name)
            assert status == 502, (name, status, text[:300])  # the upstream's 500, before any byte of a stream
            assert name in unquote(headers[DROPPED_HEADER]).split(","), name


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_issues_fallback_attack_through_the_sdk(
    gw: GatewayProcess, key: str, listener: Listener, stream: bool
) -> None:
    attack = {"fallbacks": [{"model": "openai/gpt-4o-mini", "api_base": listener.url}], "api_key": None}
    client = gw.client(key)
    with pytest.raises(openai.APIError) as failed:
        response = client.chat.completions.create(model="failing", messages=HI, stream=stream, extra_body=attack)
        for _chunk in response:
            pass
    assert_nothing_leaked(listener, str(failed.value) + str(getattr(failed.value, "body", "")), {}, "sdk")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_every_keyword_argument_at_once_through_the_sdk(
    gw: GatewayProcess, key: str, listener: Listener, stream: bool
) -> None:
    """On a model that answers: the answer comes from the configured upstream, and the header
    names every field left out."""
    attack = {name: hostile_value(name, listener.url) for name in steering_names()}
    raw = gw.client(key).chat.completions.with_raw_response.create(
        model="working", messages=HI, stream=stream, extra_body=attack
    )
    if stream:
        text = "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)
    else:
        text = raw.parse().choices[0].message.content or ""
    assert text == "echo: hi"
    assert_nothing_leaked(listener, text, raw.headers, "all at once")
    assert set(unquote(raw.headers[DROPPED_HEADER]).split(",")) >= set(list(attack)[:50])


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/v1/completions", {"model": "failing", "prompt": "hi"}, 502),
        ("/v1/embeddings", {"model": "working", "input": "hi"}, 200),
    ],
)
def test_the_other_endpoints_pass_litellm_nothing_either(
    gw: GatewayProcess, key: str, listener: Listener, path: str, body: dict, status: int
) -> None:
    every_openai_field = frozenset().union(*OPENAI_FIELDS.values())  # the request checks type them all
    attack = {name: hostile_value(name, listener.url) for name in steering_names(every_openai_field)}
    with httpx.Client(base_url=gw.url, headers={"authorization": f"Bearer {key}"}, timeout=60) as client:
        code, text, headers = post(client, path, {**attack, **body}, False)
    assert code == status, text[:300]
    assert_nothing_leaked(listener, text, headers, path)
