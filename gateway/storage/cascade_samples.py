"""Shadow samples, kept in the gateway's database so the threshold survives restarts and
`costgate cascade train --from-db` can refit the learned scorer from real traffic.

Each row stores, for each tier but the last, the scorer's confidence, the scorer's feature
vector and whether that tier agreed with the last tier, and the sample's weight (1 / the
probability it was drawn). The question and answers themselves
are stored only when the config's `log_prompts` is on: features are enough to train on.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from sqlalchemy import Column, Float, Index, Integer, MetaData, String, Table, Text, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.storage.migrate import upgrade_schema
from policies.quality import Sample
from policies.scorers.answer_features import NAMES
from policies.scorers.refit import TrainingRow

metadata = MetaData()
FEATURE_SET = ",".join(NAMES)

cascade_samples = Table(
    "cascade_samples",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("cascade", String(200), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("request_id", String(40)),
    Column("confidences", Text, nullable=False),  # JSON list, one per tier but the last
    Column("agrees", Text, nullable=False),  # JSON list of booleans
    Column("features", Text),  # JSON list of feature vectors, one per tier but the last
    Column("feature_set", Text),  # the feature names the vectors were made with
    Column("texts", Text),  # JSON {query, answers} only when log_prompts is on
    Column("weight", Float),  # 1 / the probability the sample was drawn; NULL (before issue 13): 1
    Index("ix_cascade_samples_cascade", "cascade", "id"),
)


@dataclass(frozen=True, slots=True)
class SampleRecord:
    cascade: str
    request_id: str
    sample: Sample
    features: tuple[tuple[float, ...], ...]
    texts: dict | None = None


@dataclass(frozen=True, slots=True)
class StoredSample:
    """One stored sample as the gateway's refit reads it back."""

    request_id: str | None
    sample: Sample
    features: tuple[tuple[float, ...], ...] | None  # None: made with another version's features


class SampleStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def create(self) -> None:
        """Every table at its newest revision, this one among them (gateway/storage/migrate.py)."""
        await upgrade_schema(self.engine)

    async def add(self, record: SampleRecord) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                insert(cascade_samples).values(
                    cascade=record.cascade,
                    created_at=time.time(),
                    request_id=record.request_id,
                    confidences=json.dumps(list(record.sample.confidences)),
                    agrees=json.dumps(list(record.sample.agrees)),
                    features=json.dumps([list(f) for f in record.features]),
                    feature_set=FEATURE_SET,
                    texts=json.dumps(record.texts) if record.texts is not None else None,
                    weight=record.sample.weight,
                )
            )

    async def recent(self, cascade: str, limit: int) -> list[Sample]:
        """The cascade's latest `limit` samples, oldest first."""
        query = (
            select(cascade_samples.c.confidences, cascade_samples.c.agrees, cascade_samples.c.weight)
            .where(cascade_samples.c.cascade == cascade)
            .order_by(cascade_samples.c.id.desc())
            .limit(limit)
        )
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [
            Sample(tuple(json.loads(r.confidences)), tuple(json.loads(r.agrees)), r.weight or 1.0)
            for r in reversed(rows)
        ]

    async def stored(self, cascade: str, limit: int) -> list[StoredSample]:
        """The cascade's latest `limit` samples with their request ids and features, oldest first."""
        c = cascade_samples.c
        query = (
            select(c.request_id, c.confidences, c.agrees, c.weight, c.features, c.feature_set)
            .where(c.cascade == cascade)
            .order_by(c.id.desc())
            .limit(limit)
        )
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        out = []
        for r in reversed(rows):
            sample = Sample(tuple(json.loads(r.confidences)), tuple(json.loads(r.agrees)), r.weight or 1.0)
            vectors = json.loads(r.features) if r.features and r.feature_set == FEATURE_SET else []
            ok = len(vectors) == len(sample.confidences) > 0
            out.append(StoredSample(r.request_id, sample, tuple(tuple(v) for v in vectors) if ok else None))
        return out

    async def texted(self, cascade: str, limit: int) -> list[tuple[dict, float]]:
        """The cascade's latest `limit` samples that kept their text (`log_prompts`), oldest
        first: ({query, answers: [cheap..., last]}, weight)."""
        c = cascade_samples.c
        query = (
            select(c.texts, c.weight)
            .where(c.cascade == cascade, c.texts.is_not(None))
            .order_by(c.id.desc())
            .limit(limit)
        )
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [(json.loads(r.texts), r.weight or 1.0) for r in reversed(rows)]

    async def training_rows(self, cascade: str | None = None) -> list[TrainingRow]:
        """Every stored tier answer made with this version's features, oldest first."""
        query = (
            select(cascade_samples.c.features, cascade_samples.c.agrees, cascade_samples.c.weight)
            .where(cascade_samples.c.feature_set == FEATURE_SET)
            .order_by(cascade_samples.c.id)
        )
        if cascade is not None:
            query = query.where(cascade_samples.c.cascade == cascade)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        out = []
        for r in rows:
            for vector, agreed in zip(json.loads(r.features or "[]"), json.loads(r.agrees)):
                out.append(TrainingRow(tuple(vector), bool(agreed), r.weight or 1.0))
        return out
