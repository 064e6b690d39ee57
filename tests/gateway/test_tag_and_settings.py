from __future__ import annotations

from decimal import Decimal

import pytest

from gateway.config.models_config import default_models
from gateway.config.settings import load_settings
from gateway.core.asked import CacheControl, parse_max_cost, parse_tags
from gateway.core.errors import InvalidRequest


@pytest.mark.parametrize(
    "header, flags",
    [
        (None, CacheControl.DEFAULT),
        ("no-cache", CacheControl.NO_CACHE),
        ("no-store", CacheControl.NO_STORE),
        ("no-cache, no-store", CacheControl.NO_CACHE | CacheControl.NO_STORE),
        ("NO-STORE ,", CacheControl.NO_STORE),
        ("bogus", CacheControl.DEFAULT),
    ],
)
def test_cache_control(header: str | None, flags: CacheControl) -> None:
    assert CacheControl.parse(header) == flags


@pytest.mark.parametrize(
    "header, tags",
    [(None, []), ("a,b", ["a", "b"]), (" a , ,b ", ["a", "b"]), ("env=prod,team:x", ["env=prod", "team:x"])],
)
def test_parse_tags(header: str | None, tags: list[str]) -> None:
    assert parse_tags(header) == tags


@pytest.mark.parametrize("header", ["a b", "<script>", "x" * 65])
def test_bad_tags(header: str) -> None:
    with pytest.raises(InvalidRequest):
        parse_tags(header)


@pytest.mark.parametrize("header, value", [(None, None), ("0.01", Decimal("0.01")), (" 2 ", Decimal("2"))])
def test_max_cost(header: str | None, value: Decimal | None) -> None:
    assert parse_max_cost(header) == value


@pytest.mark.parametrize("header", ["abc", "-1", "0", "NaN", "Infinity"])
def test_bad_max_cost(header: str) -> None:
    with pytest.raises(InvalidRequest):
        parse_max_cost(header)


def test_env_references_are_resolved(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("admin_key: env:ADMIN\nmodels:\n  - name: m\n    api_base: http://x/v1\n    api_key: env:UP\n")
    settings = load_settings(path, {"ADMIN": "sk-admin", "UP": "sk-up"})
    assert settings.admin_key == "sk-admin" and settings.models[0].api_key == "sk-up"


def test_defaults_serve_what_the_environment_provides() -> None:
    assert default_models({}) == []
    names = {m.name for m in default_models({"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "a"})}
    assert {"gpt-4o-mini", "gpt-4o", "claude-haiku-4-5"} <= names


def test_duplicate_model_names_are_refused(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("models:\n  - {name: m, api_base: 'http://x'}\n  - {name: m, api_base: 'http://y'}\n")
    with pytest.raises(ValueError, match="duplicate"):
        load_settings(path, {})
