"""robench-corruption: corruption accuracy and mCE as a robench plugin outside the core.

Registers the ``corruption`` protocol (knobs ``--set corruption.KEY=VALUE``) and the ``mce``
metric with its CLI report and leaderboard section. See Hendrycks & Dietterich, "Benchmarking
Neural Network Robustness to Common Corruptions and Perturbations" (arXiv:1903.12261).
"""

from __future__ import annotations

from robench import hookimpl
from robench.specs import MetricSpec, ProtocolSpec

from robench_corruption import leaderboard, metric, protocol, report


@hookimpl
def register_protocols(register):
    """Register the corruption protocol."""
    register(ProtocolSpec.from_module(protocol, check_knobs=protocol.check_knobs))


@hookimpl
def register_metrics(register):
    """Register mce."""
    register(MetricSpec.from_module(metric, protocol=protocol, report=report.report_lines,
                                    leaderboard=leaderboard.SECTION))
