"""Family ``source-aware`` (Kilinc & Uysal): robustness to unseen sources inside a data set.

Registers the ``source-aware`` protocol (source-inclusive, source-exclusive and random
partitions), the ``random-split`` protocol (its random partitions alone) and the
``adequacy`` protocol (training-size sweep), and the metrics built on them: ``rho``,
``adequacy`` and ``lost-test`` (estimating test accuracy when the test set is lost).
"""

from __future__ import annotations

from robench import hookimpl
from robench.families.source_aware import (adequacy, adequacy_protocol, claims, leaderboard,
                                           lost_test, protocol, random_split_protocol, report,
                                           rho)
from robench.specs import LeaderboardSection, MetricSpec, PairedComparison, ProtocolSpec


@hookimpl
def register_protocols(register):
    """Register source-aware, random-split and adequacy."""
    register(ProtocolSpec(
        name=protocol.NAME, version=protocol.VERSION, plan=protocol.plan, run=protocol.run,
        trial_versions=tuple(sorted(set(protocol.KIND_VERSIONS.values()) - {protocol.VERSION})),
        prepare=protocol.prepare, sources_per_class=lambda cfg: cfg.k,
        preconditions=protocol.preconditions, partition=protocol.partition,
        description="Per class k sources by clustering; R repeats each of source-inclusive, "
                    "source-exclusive and stratified random train/test partitions.",
    ))
    register(ProtocolSpec(
        name=random_split_protocol.NAME, version=random_split_protocol.VERSION, plan=random_split_protocol.plan,
        run=random_split_protocol.run,
        description="The source-aware protocol's stratified random splits alone (same trials, "
                    "shared by key), for metrics that need no clusterer.",
    ))
    register(ProtocolSpec(
        name=adequacy_protocol.NAME, version=adequacy_protocol.VERSION,
        plan=adequacy_protocol.plan, run=adequacy_protocol.run,
        trial_versions=tuple(sorted(set(adequacy_protocol.KIND_VERSIONS.values())
                                    - {adequacy_protocol.VERSION})),
        prepare=adequacy_protocol.prepare, section=adequacy_protocol.SECTION,
        knobs=adequacy_protocol.KNOBS,
        sources_per_class=lambda cfg: cfg.k, preconditions=protocol.preconditions,
        description="Nested, stratified subsets of each source-aware training partition "
                    "(test partitions fixed): the training-size sweep.",
    ))


@hookimpl
def register_metrics(register):
    """Register rho, adequacy and lost-test."""
    register(MetricSpec(
        name=rho.METRIC,
        description="Source-aware robustness E[AccX]/E[AccI] with the interval and Fieller's CI.",
        protocol=protocol.NAME,
        aggregate=rho.aggregate,
        definition=rho.DEFINITION,
        higher_is_better=True,
        uses_clusterer=True,
        version=rho.VERSION,
        report=report.rho_lines,
        claims=claims.rho_claims,
        paired=PairedComparison(score=rho.METRIC, values=rho.paired_values,
                                interval=rho.interval_at),
        moved_from="robench.builtin.metrics",
        leaderboard=LeaderboardSection(build=leaderboard.section, template="rho.html",
                                       templates=leaderboard.TEMPLATES,
                                       title="Robustness rho",
                                       headline=leaderboard.headline,
                                       columns=leaderboard.HEADLINE_COLUMNS,
                                       legend=leaderboard.LEGEND,
                                       plots=leaderboard.plots, ranks=leaderboard.ranks),
        references=(("Ozsel Kilinc and Ismail Uysal, Source-aware Partitioning for Robust "
                     "Cross-validation (2019)", ""),),
        display_order=10,
    ))
    register(MetricSpec(
        name=adequacy.METRIC,
        description="Dataset adequacy: E[AccX], E[AccI] and rho as the training set grows, "
                    "per class too.",
        protocol=adequacy_protocol.NAME,
        aggregate=adequacy.aggregate,
        definition=adequacy.DEFINITION,
        higher_is_better=True,
        uses_clusterer=True,
        version=adequacy.VERSION,
        report=report.adequacy_lines,
        claims=claims.adequacy_claims,
        leaderboard=LeaderboardSection(build=leaderboard.adequacy_section,
                                       template="adequacy.html",
                                       templates=leaderboard.TEMPLATES,
                                       title="Dataset adequacy",
                                       plots=leaderboard.adequacy_plots),
        moved_from="robench.builtin.adequacy",
        references=(("Ozsel Kilinc and Ismail Uysal, Source-aware Partitioning for Robust "
                     "Cross-validation (2019)", ""),),
        display_order=60,
    ))
    register(MetricSpec(
        name=lost_test.METRIC,
        description="Lost-test-set estimators vs the true test accuracy of the random "
                    "splits; headline: the realistic estimator's (practical_logged) error.",
        protocol=random_split_protocol.NAME,
        aggregate=lost_test.aggregate,
        definition=lost_test.DEFINITION,
        uses_clusterer=False,
        version=lost_test.VERSION,
        higher_is_better=False,
        report=report.lost_test_lines,
        claims=claims.lost_test_claims,
        moved_from="robench.builtin.adequacy",
        references=(("What If You Lose Your Test Set? (blog post, 2017-02-16); robench "
                     "implements the corrected estimator", ""),),
        display_order=50,
    ))
