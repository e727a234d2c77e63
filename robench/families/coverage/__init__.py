"""Family ``coverage`` (Mani et al.): the ``coverage`` protocol and metric (docs/coverage.md)."""

from __future__ import annotations

from robench import hookimpl
from robench.families.coverage import claims, leaderboard, metric, protocol, report
from robench.specs import MetricSpec, ProtocolSpec


@hookimpl
def register_protocols(register):
    """Register coverage (after clusterability: it reuses that protocol's reference models)."""
    register(ProtocolSpec.from_module(protocol, check_knobs=protocol.validate))


@hookimpl
def register_metrics(register):
    """Register coverage."""
    register(MetricSpec.from_module(metric, protocol=protocol, report=report.report_lines,
                                    claims=claims.all_coverage_claims,
                                    leaderboard=leaderboard.SECTION))
