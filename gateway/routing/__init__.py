"""Route targets: what answers a model name. A deployment with its fallbacks (`direct`), a
cascade of tiers (`cascade`), the cost router (`router`). Each makes the upstream calls and
charges the request for them; the decisions they follow (thresholds, quality bounds, the
router's choice, breaker states) are pure functions in policies/."""
