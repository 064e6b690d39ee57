"""Spend control: budgets, plans, rate limits, holds and their leases, alerts and their delivery."""
