"""Speculative decoding: the accept rule (a reference, in numpy), vLLM's config, and when to turn it off.

vLLM does the real speculation (`speculative_config`: n-gram prompt lookup or a draft model).
This module holds what costgate must get right around it:

- `verify`: the rejection-sampling rule of Leviathan et al. / Chen et al., written as a pure
  function so a statistical test can show that its output is distributed exactly as the
  target model's. For each drafted token x_i (drawn from the draft distribution q_i):
  accept with probability min(1, p_i(x_i) / q_i(x_i)) — the probabilities of the *sampled*
  token, not the draft's most likely one; on the first rejection, emit one token drawn from
  norm(max(0, p_i - q_i)) — a difference of probabilities, never of logits — and stop; when
  every draft is accepted, emit a bonus token drawn from p_{k+1}.
- `speculative_config`: the dict vLLM takes (`method: ngram` with prompt-lookup bounds, or a
  draft model with `draft_sample_method: probabilistic`, which keeps sampling exact; vLLM's
  default `greedy` only matches the target under greedy decoding).
- `should_speculate`: speculation buys latency at low load and costs throughput at high load
  (the verifier computes k extra positions per sequence, mostly wasted when acceptance is
  low, and a busy batch is already compute-bound). A pure policy over the measured
  acceptance rate and the current load.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True, slots=True)
class Verified:
    tokens: list[int]  # the accepted drafts, then one corrected or bonus token
    accepted: int  # how many of the drafts were kept


def residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """norm(max(0, p - q)): where to sample from after a rejection. Falls back to p when p == q
    (a rejection then has probability 0, but floating point may still land there)."""
    diff = np.maximum(p - q, 0.0)
    total = diff.sum()
    return diff / total if total > 0 else p


def verify(
    draft_tokens: list[int], draft_probs: np.ndarray, target_probs: np.ndarray, rng: np.random.Generator
) -> Verified:
    """One verification step. `draft_probs` is [k, V] (q_1..q_k), `target_probs` [k + 1, V]
    (p_1..p_{k+1}, the last one for the bonus token); rows sum to 1."""
    k = len(draft_tokens)
    if draft_probs.shape[0] != k or target_probs.shape[0] != k + 1:
        raise ValueError("need k draft distributions and k + 1 target distributions")
    out: list[int] = []
    for i, token in enumerate(draft_tokens):
        p, q = target_probs[i, token], draft_probs[i, token]
        if q > 0 and rng.random() < min(1.0, p / q):
            out.append(token)
            continue
        out.append(int(rng.choice(target_probs.shape[1], p=residual(target_probs[i], draft_probs[i]))))
        return Verified(out, i)
    out.append(int(rng.choice(target_probs.shape[1], p=target_probs[k])))
    return Verified(out, k)


def speculative_config(spec: dict[str, Any]) -> dict[str, Any] | None:
    """vLLM's `speculative_config` from the engine config's `speculative` block (None: off).

    `{method: ngram, num_speculative_tokens: 4, prompt_lookup_min: 2, prompt_lookup_max: 5}` or
    `{model: DIR, num_speculative_tokens: 4, exact: true}`; `exact` (default true for a draft
    model) asks vLLM for probabilistic draft sampling, so sampled outputs follow the target.
    """
    if not spec or spec.get("enabled") is False:
        return None
    k = int(spec.get("num_speculative_tokens", 4))
    if k < 1:
        raise ValueError("speculative.num_speculative_tokens must be at least 1")
    method = spec.get("method", "draft_model" if spec.get("model") else "ngram")
    if method == "ngram":
        low, high = int(spec.get("prompt_lookup_min", 2)), int(spec.get("prompt_lookup_max", 5))
        if not 1 <= low <= high:
            raise ValueError("speculative: need 1 <= prompt_lookup_min <= prompt_lookup_max")
        return {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_min": low, "prompt_lookup_max": high}
    if not spec.get("model"):
        raise ValueError(f"speculative method {method!r} needs a draft `model`")
    config = {"method": method, "model": str(spec["model"]), "num_speculative_tokens": k}
    if spec.get("exact", True):
        config["draft_sample_method"] = "probabilistic"
    return config


@dataclass(frozen=True, slots=True)
class SpeculationPolicy:
    """When speculation pays. `min_acceptance`: below this share of accepted drafts the verifier's
    extra work is mostly wasted. `max_running`: at or above this many running sequences the
    engine is throughput-bound and speculation slows it down. `hysteresis` keeps a decision
    from flapping around a threshold. `min_drafts`: fewer measured drafts than this is no evidence."""

    min_acceptance: float = 0.3
    max_running: int = 8
    hysteresis: float = 0.05
    min_drafts: int = 50


def should_speculate(
    policy: SpeculationPolicy, currently_on: bool, acceptance: float | None, drafts_measured: int, running: float
) -> bool:
    """Whether the next start of the engine should speculate. Pure: a table in the tests.

    `running` is the mean number of running sequences over the last measured window. Unknown
    acceptance (no drafts measured yet) keeps the current setting; load at or above the
    threshold turns it off; otherwise acceptance decides, with hysteresis.
    """
    if running >= policy.max_running:
        return False
    if acceptance is None or drafts_measured < policy.min_drafts:
        return currently_on
    if currently_on:
        return acceptance >= policy.min_acceptance - policy.hysteresis
    return acceptance >= policy.min_acceptance + policy.hysteresis
