"""A leaderboard repository that runs itself: contributions in, checked, merged, published
(``robench init-leaderboard DIR``, ``robench publish STEP DIR``; docs/publishing.md)."""

from robench.exchange.publish.common import (ACCEPTED, DEFAULT_SETTINGS, PUBLISHED, REPORT_LIMIT,
                                             TORCH_CPU_INDEX, StepResult)
from robench.exchange.publish.lock import clear_leftovers, repository_lock
from robench.exchange.publish.repository import accepted, contributions, pending, settings
from robench.exchange.publish.scaffold import init_repository, requirements, template
from robench.exchange.publish.steps import (CHECK, RUN, build, deploy, diff, merge, validate,
                                            verify)

__all__ = ["ACCEPTED", "CHECK", "DEFAULT_SETTINGS", "PUBLISHED", "REPORT_LIMIT", "RUN",
           "TORCH_CPU_INDEX", "StepResult", "accepted", "build", "clear_leftovers",
           "contributions", "deploy", "diff", "init_repository", "merge", "pending",
           "repository_lock", "requirements", "settings", "template", "validate", "verify"]
