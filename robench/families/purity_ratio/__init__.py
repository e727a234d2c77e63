"""Family ``purity-ratio`` (Ho et al.): feature-space clusterability as a robustness indicator.

Registers the ``clusterability`` protocol (one reference model per data set and model, its
features clustered by k-means and a multicut, its corruption and adversarial robustness
measured) and the ``purity-ratio`` metric, validated across a zoo of models
(:mod:`robench.families.purity_ratio.zoo`).
"""

from __future__ import annotations

from robench import hookimpl
from robench.families.purity_ratio import claims, leaderboard, metric, protocol, report
from robench.specs import LeaderboardSection, MetricSpec, ProtocolSpec


@hookimpl
def register_protocols(register):
    """Register clusterability."""
    register(ProtocolSpec(
        name=protocol.NAME, version=protocol.VERSION, plan=protocol.plan, run=protocol.run,
        section=protocol.SECTION, knobs=protocol.KNOBS,
        description="A reference model per (data set, model) and its zoo: penultimate "
                    "features clustered (k-means, multicut), class overlap, corruption and "
                    "adversarial robustness.",
    ))


@hookimpl
def register_metrics(register):
    """Register purity-ratio."""
    register(MetricSpec(
        name=metric.METRIC,
        description="Feature-space clusterability p_purity (k-means, multicut, combined eq. 10) "
                    "vs corruption / adversarial robustness, validated across a model zoo.",
        needs_features=True,
        protocol=protocol.NAME,
        aggregate=metric.aggregate,
        definition=metric.DEFINITION,
        higher_is_better=True,
        uses_clusterer=False,
        version=metric.VERSION,
        report=report.report_lines,
        claims=claims.purity_claims,
        moved_from="robench.builtin.clusterability",
        leaderboard=LeaderboardSection(build=leaderboard.section, template="purity_ratio.html",
                                       templates=leaderboard.TEMPLATES,
                                       title="Feature-space clusterability",
                                       headline=leaderboard.headline,
                                       ranks=leaderboard.ranks,
                                       columns=(("model_acc", "Model_ACC", "pct"),),
                                       legend=leaderboard.LEGEND,
                                       pseudo_models=(metric.ZOO_MODEL,)),
        references=(("Kalun Ho, Franz-Josef Pfreundt, Janis Keuper and Margret Keuper, "
                     "Estimating the Robustness of Classification Models by the Structure of "
                     "the Learned Feature-Space (AAAI-22 workshop)",
                     "https://arxiv.org/abs/2106.12303"),),
        display_order=20,
    ))
