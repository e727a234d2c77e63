"""Family ``source-aware`` (Kilinc & Uysal): robustness to unseen sources inside a data set."""

from __future__ import annotations

from robench import hookimpl
from robench.families.source_aware import (adequacy, adequacy_protocol, claims, leaderboard,
                                           lost_test, protocol, random_split_protocol, report,
                                           rho)
from robench.specs import MetricSpec, ProtocolSpec


@hookimpl
def register_protocols(register):
    """Register source-aware, random-split and adequacy."""
    register(ProtocolSpec.from_module(
        protocol, prepare=protocol.prepare, sources_per_class=protocol.sources_per_class,
        preconditions=protocol.preconditions, partition=protocol.partition))
    register(ProtocolSpec.from_module(random_split_protocol))
    register(ProtocolSpec.from_module(
        adequacy_protocol, prepare=adequacy_protocol.prepare,
        sources_per_class=protocol.sources_per_class, preconditions=protocol.preconditions))


@hookimpl
def register_metrics(register):
    """Register rho, adequacy and lost-test."""
    register(MetricSpec.from_module(rho, protocol=protocol, report=report.rho_lines,
                                    claims=claims.rho_claims, leaderboard=leaderboard.SECTION))
    register(MetricSpec.from_module(adequacy, protocol=adequacy_protocol,
                                    report=report.adequacy_lines, claims=claims.adequacy_claims,
                                    leaderboard=leaderboard.ADEQUACY_SECTION))
    register(MetricSpec.from_module(lost_test, protocol=random_split_protocol,
                                    report=report.lost_test_lines,
                                    claims=claims.lost_test_claims))
