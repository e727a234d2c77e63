"""Family ``purity-ratio`` (Ho et al.): the ``clusterability`` protocol and the ``purity-ratio``
metric, validated across a zoo of models (docs/clusterability.md)."""

from __future__ import annotations

from robench import hookimpl
from robench.families.purity_ratio import claims, leaderboard, metric, protocol, report
from robench.specs import MetricSpec, ProtocolSpec


@hookimpl
def register_protocols(register):
    """Register clusterability."""
    register(ProtocolSpec.from_module(protocol))


@hookimpl
def register_metrics(register):
    """Register purity-ratio."""
    register(MetricSpec.from_module(metric, protocol=protocol, report=report.report_lines,
                                    claims=claims.purity_claims,
                                    leaderboard=leaderboard.SECTION))
