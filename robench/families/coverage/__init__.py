"""Family ``coverage`` (Mani et al.): coverage testing in a model's feature space.

Registers the ``coverage`` protocol (R reference models per data set and model; EP, CP, BC,
PBC of the test split, covariate shift, coverage-guided generation and a decoder) and the
``coverage`` metric (coverage-guided accuracy).
"""

from __future__ import annotations

from robench import hookimpl
from robench.families.coverage import claims, leaderboard, metric, protocol, report
from robench.specs import LeaderboardSection, MetricSpec, PairedComparison, ProtocolSpec


@hookimpl
def register_protocols(register):
    """Register coverage (after clusterability: it reuses that protocol's reference models)."""
    register(ProtocolSpec(
        name=protocol.NAME, version=protocol.VERSION, plan=protocol.plan, run=protocol.run,
        after=protocol.AFTER, section=protocol.SECTION, knobs=protocol.KNOBS,
        check_knobs=protocol.validate,
        description="R reference models per (data set, model): test-set coverage (EP, CP, BC, "
                    "PBC), covariate shift, and coverage-guided generated test sets.",
    ))


@hookimpl
def register_metrics(register):
    """Register coverage."""
    register(MetricSpec(
        name=metric.METRIC,
        description="Coverage-guided accuracy: accuracy on feature-space test sets generated "
                    "from centroid and boundary points (5 mixes); EP/CP/BC/PBC, covariate shift.",
        needs_features=True,
        protocol=protocol.NAME,
        aggregate=metric.aggregate,
        definition=metric.DEFINITION,
        higher_is_better=True,
        uses_clusterer=False,
        version=metric.VERSION,
        report=report.report_lines,
        claims=claims.all_coverage_claims,
        moved_from="robench.builtin.coverage",
        # repeat r of every model shares its split and seed: racing (--until decided, --budget)
        paired=PairedComparison(score=metric.METRIC, values=metric.paired_values,
                                interval=metric.interval_at,
                                repeats_knob=f"{protocol.SECTION}.repeats"),
        leaderboard=LeaderboardSection(build=leaderboard.section, template="coverage.html",
                                       templates=leaderboard.TEMPLATES,
                                       title="Coverage-guided accuracy",
                                       headline=leaderboard.headline,
                                       columns=(("model_acc", "test acc.", "pct"),),
                                       legend=leaderboard.LEGEND,
                                       plots=leaderboard.plots, ranks=leaderboard.ranks),
        references=(("Senthil Mani, Anush Sankaran, Srikanth Tamilselvam and Akshay Sethi, "
                     "Coverage Testing of Deep Learning Models using Dataset Characterization "
                     "(2019)", "https://arxiv.org/abs/1911.07309"),),
        display_order=30,
    ))
