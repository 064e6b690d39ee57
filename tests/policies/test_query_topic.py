"""The learned scorer reads what a question is about: the query's MiniLM vector on the fixed
basis of policies/scorers/topic.py."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from policies.scorers import Scored
from policies.scorers.answer_features import NAMES, features
from policies.scorers.learned import LearnedModel, auc
from policies.scorers.topic import AXES, basis
from policies.scorers.training import Matrix, train_matrix
from policies.semantic_cache.embedder import Embedder
from tests.topics import ANSWER, DRIVING, examples, questions


def test_the_basis_is_orthonormal_and_an_unknown_query_sits_at_the_mean(embedder: Embedder) -> None:
    b = basis()
    assert b.axes.shape == (AXES, 384)
    np.testing.assert_allclose(b.axes @ b.axes.T, np.eye(AXES), atol=1e-5)
    assert b.coordinates(None) == [0.0] * AXES
    np.testing.assert_allclose(b.coordinates(b.mean), 0.0, atol=1e-6)
    vector = embedder.embed("How many miles can a car drive on 12 gallons of gasoline?")
    topic = features(Scored("q", ANSWER, query_vector=vector))[-AXES:]
    assert topic == b.coordinates(vector) and np.abs(topic).max() > 0.05
    assert features(Scored("q", ANSWER))[-AXES:] == [0.0] * AXES
    assert NAMES[-AXES:] == tuple(f"query_topic_{i}" for i in range(1, AXES + 1))


def test_the_scorer_tells_apart_answers_that_look_alike_by_their_questions_topic(embedder: Embedder) -> None:
    rng = random.Random(5)
    data = examples(embedder, rng, 30)
    model = train_matrix(Matrix.of(data), folds=1).model
    held_out = examples(embedder, random.Random(6), 15)
    with_topic = [model.confidence(e.item) for e in held_out]
    assert auc(with_topic, [e.acceptable for e in held_out]) > 0.95  # driving right, baking wrong
    # the answers are the same text: without the query's vector the scorer has only the
    # questions' lengths and numbers to go on
    without = train_matrix(Matrix.of([replace(e, item=Scored(e.item.query, ANSWER)) for e in data]), folds=1).model
    plain = [without.confidence(Scored(e.item.query, ANSWER)) for e in held_out]
    assert auc(plain, [e.acceptable for e in held_out]) < 0.8


def test_a_scorer_trained_before_the_topic_features_still_loads_and_scores_as_it_did(
    tmp_path: Path, embedder: Embedder
) -> None:
    data = Matrix.of(examples(embedder, random.Random(7), 20))
    before = len(NAMES) - AXES  # the features a file written before the topic was added knows
    old = train_matrix(Matrix(data.x[:, :before], data.acceptable, data.agrees, data.last_right), folds=1).model
    old.save(tmp_path / "old.json")
    loaded = LearnedModel.load(tmp_path / "old.json")
    assert loaded.accept.names == NAMES[:before]
    question = questions(DRIVING, random.Random(8), 1)[0]
    item = Scored(question, ANSWER, query_vector=embedder.embed(question))
    assert loaded.confidence(item) == pytest.approx(old.confidence_of(features(item)[:before]))


def test_a_scorer_whose_features_are_not_these_is_refused(tmp_path: Path, embedder: Embedder) -> None:
    model = train_matrix(Matrix.of(examples(embedder, random.Random(9), 10)), folds=1).model
    data = model.to_json()
    data["accept"]["features"] = ["query_words_log", "something_else"]
    data["accept"]["mean"], data["accept"]["scale"], data["accept"]["weights"] = [0, 0], [1, 1], [0, 0]
    path = tmp_path / "other.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="retrain it"):
        LearnedModel.load(path)
