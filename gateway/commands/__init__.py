"""The `costgate` subcommands besides serve: cache, cascade, distill, db, what-if, reconcile,
and teams|keys|budgets over the admin API."""
