"""Questions on two topics whose cheap answers look exactly alike: what only the query's
topic (policies/scorers/topic.py) can tell apart. Shared by the scorer's and the gateway's tests."""

from __future__ import annotations

import random

from policies.scorers import Scored
from policies.scorers.training import TrainingExample
from policies.semantic_cache.embedder import Embedder

BAKING = [
    "How many cups of flour does {name} need to bake {n} loaves of bread?",
    "{name} bakes {n} trays of cookies for the school fair. How many cookies does she bake?",
    "A cake recipe needs {n} eggs and some sugar. How much butter does {name} need for the icing?",
    "{name} is making pancakes for breakfast with {n} cups of milk. How many pancakes can she cook?",
    "The bakery sells {n} muffins and croissants each morning. How many pastries does {name} bake?",
]
DRIVING = [
    "How many miles can {name}'s car drive on {n} gallons of gasoline on the highway?",
    "{name} drives his truck {n} miles to the city. How many liters of fuel does the engine burn?",
    "A bus leaves the station and travels {n} kilometers on the motorway. How long is {name}'s trip?",
    "{name} replaces the tires on {n} cars at the garage. How many wheels does the mechanic change?",
    "The train from the airport covers {n} miles of track. How fast does {name}'s train go?",
]
NAMES = ["Anna", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hugo"]
ANSWER = "The total is 3 + 4 = 7.\n#### 7"  # the same shape, right or wrong


def questions(templates: list[str], rng: random.Random, n: int) -> list[str]:
    out: set[str] = set()
    while len(out) < n:
        out.add(rng.choice(templates).format(name=rng.choice(NAMES), n=rng.randint(2, 60)))
    return sorted(out)


def examples(embedder: Embedder, rng: random.Random, n: int) -> list[TrainingExample]:
    """`n` questions a topic: the cheap answers to baking questions are wrong, to driving ones right."""
    labelled = [(q, False) for q in questions(BAKING, rng, n)] + [(q, True) for q in questions(DRIVING, rng, n)]
    vectors = embedder.embed_many([q for q, _ in labelled])
    return [TrainingExample(Scored(q, ANSWER, query_vector=v), ok, True, ok) for (q, ok), v in zip(labelled, vectors)]
