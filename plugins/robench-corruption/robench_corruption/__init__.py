"""robench-corruption: corruption accuracy and mCE as a robench plugin outside the core.

Registers the ``corruption`` protocol (knobs ``--set corruption.KEY=VALUE``) and the ``mce``
metric with its CLI report and leaderboard section. See Hendrycks & Dietterich, "Benchmarking
Neural Network Robustness to Common Corruptions and Perturbations" (arXiv:1903.12261).
"""

from __future__ import annotations

from robench import hookimpl
from robench.specs import LeaderboardSection, MetricSpec, ProtocolSpec

from robench_corruption import leaderboard, metric, protocol, report


def _applies_to(dataset_spec, model_spec):
    if not dataset_spec.is_image:
        return f"mce needs images and data set '{dataset_spec.name}' is tabular"
    return None


@hookimpl
def register_protocols(register):
    """Register the corruption protocol."""
    register(ProtocolSpec(
        name=protocol.NAME, version=protocol.VERSION, plan=protocol.plan, run=protocol.run,
        section=protocol.SECTION, knobs=protocol.KNOBS, check_knobs=protocol.check_knobs,
        description="The reference model of each (data set, model) and of a baseline model, "
                    "measured on every registered corruption x severity of a test subsample.",
    ))


@hookimpl
def register_metrics(register):
    """Register mce."""
    register(MetricSpec(
        name=metric.METRIC, version=metric.VERSION,
        description="Mean corruption error (mCE) relative to a baseline model, relative mCE "
                    "and mean corruption accuracy (Hendrycks & Dietterich).",
        protocol=protocol.NAME, aggregate=metric.aggregate, definition=metric.DEFINITION,
        higher_is_better=False, uses_clusterer=False, applies_to=_applies_to,
        report=report.report_lines,
        leaderboard=LeaderboardSection(build=leaderboard.section, template="mce.html",
                                       templates=leaderboard.TEMPLATES,
                                       title="Common corruptions (mCE)",
                                       headline=leaderboard.headline,
                                       legend=leaderboard.LEGEND),
        references=(("Dan Hendrycks and Thomas Dietterich, Benchmarking Neural Network "
                     "Robustness to Common Corruptions and Perturbations (ICLR 2019)",
                     "https://arxiv.org/abs/1903.12261"),),
        display_order=30,
    ))
