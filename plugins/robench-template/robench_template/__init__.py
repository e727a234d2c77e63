"""Template robench plugin: one extra model, ``template-cnn`` (a small torch CNN), and one
metric, ``template-gap`` (a family of one module, built with robench's family kit).

Copy the folder ``plugins/robench-template`` to ``plugins/robench-my-model`` and change these
lines (each one is also marked ``CHANGE`` in the code):

1. The package folder ``robench_template/`` -> ``robench_my_model/``, and the same name in
   ``pyproject.toml`` (``[project.entry-points.robench]`` and ``packages.find``).
2. ``__version__``: the plugin's version. It is part of every trial key of every model this
   plugin registers, so a bump re-runs those trials; keep it equal to ``version`` in
   ``pyproject.toml`` (that one is what robench reads once the plugin is pip-installed).
3. ``TemplateCNN`` in ``cnn.py``: your ``torch.nn.Module``. robench trains it with
   :class:`robench.learn.train.TorchClassifier` (Adam, early stopping on the validation split) and
   needs from it:

   * ``forward(x)``: class logits ``(n, n_classes)`` for a batch of rows ``x``. Rows arrive
     flat, float32 ``(n, C*H*W)``: an image data set stores each image as a row and says its
     ``(C, H, W)`` in ``ctx.image_shape``, so reshape in ``forward``.
   * ``features(x)``: the penultimate activations, and ``head``: the final ``nn.Linear``
     (``forward(x) == head(features(x))``). Feature-space metrics (purity-ratio, coverage)
     read them.
   * optional, for a CNN: ``conv_features(x)`` (last conv block, flattened) and
     ``from_conv_features(z)`` (the rest of the network); coverage then reads the last conv
     layer, as its paper does.

   Keep ``import torch`` in that module, not here: ``robench list`` imports this package.
4. ``build_module(ctx)``: returns a fresh module sized for the trial's data (``ctx`` is a
   :class:`robench.specs.ModelContext`: ``n_features``, ``n_classes``, ``image_shape``,
   ``seed``, ``train``). TorchClassifier calls it inside ``fit`` after seeding torch from
   ``ctx.seed``, so the initial weights are reproducible.
5. ``build_template_cnn(ctx)``: the factory robench calls once per trial.
   ``TorchClassifier.from_context(ctx, build_module)`` takes the training budget from
   ``ctx.train`` (``max_epochs``, ``patience``, ``batch_size``, ``lr``, ``weight_decay``;
   defaults for missing keys, other keys such as ``mc_samples`` ignored) and the seed from
   ``ctx.seed``; keyword arguments override them (``lr=1e-3``). It implements the whole
   classifier contract (``fit(X, y, X_val, y_val)`` never sees the test partition,
   ``predict`` returns int64 classes, ``features``, ``history_`` ...). A model that is not a
   torch network returns its own classifier instead: the contract is in
   ``docs/plugin-hooks.md``.
6. ``register_models``: one ``register(ModelSpec(...))`` per model. ``name`` is a lowercase
   slug (letters, digits, ``-``) that must not clash with any other plugin's model;
   ``description`` is the line ``robench list models`` prints; ``version`` is the model's own
   version (bump it when the model's results change, e.g. another architecture);
   ``requires_image=True`` for a model that needs ``ctx.image_shape`` (a CNN: robench then
   skips it on tabular data sets). Drop it for a model that takes any flat rows.

7. ``register_metrics``: one ``register(MetricSpec.from_module(metric, protocol=...))`` per
   metric. The metric module (``metric.py``, ``CHANGE`` there) owns its name, version,
   definition and ``aggregate``; this hook only wires it (a report, claims or leaderboard
   section from other modules of the plugin go in as ``report=...``, ``claims=...``,
   ``leaderboard=...``). A plugin that only adds models drops this hook and ``metric.py``.

``tests/test_template.py`` checks the model with :func:`robench.testing.check_model` and the
metric with :func:`robench.testing.check_metric`; set its ``PLUGIN_MODULE``, ``MODEL`` and
``METRIC`` to yours.
"""

from __future__ import annotations

from robench import hookimpl
from robench.specs import MetricSpec, ModelContext, ModelSpec

from robench_template import metric  # CHANGE (1): your package name

__version__ = "0.2.0"  # CHANGE (2): keep equal to `version` in pyproject.toml


def build_module(ctx: ModelContext):  # CHANGE (4): your network, sized from ctx
    """Return an untrained TemplateCNN for the trial's image shape and classes."""
    from robench_template.cnn import TemplateCNN  # CHANGE (1): your package name

    return TemplateCNN(ctx.image_shape, ctx.n_classes)


def build_template_cnn(ctx: ModelContext):  # CHANGE (5): your factory
    """Return an untrained classifier: TemplateCNN trained with the trial's budget and seed."""
    from robench.learn.train import TorchClassifier

    if ctx.image_shape is None:
        raise ValueError("template-cnn needs image data (ModelContext.image_shape is None)")
    return TorchClassifier.from_context(ctx, build_module)


@hookimpl
def register_models(register):  # CHANGE (6): one register(...) call per model
    """Register template-cnn."""
    register(ModelSpec(
        name="template-cnn",
        build=build_template_cnn,
        description="Template CNN: conv3x3 8-maxpool, conv3x3 16-avgpool to 4x4, fc 64, Adam, "
                    "early stopping on validation accuracy; features: 64-d fc layer",
        version="1",
        requires_image=True,
    ))


@hookimpl
def register_metrics(register):  # CHANGE (7): one register(...) per metric, or drop it
    """Register template-gap (everything it is lives in metric.py)."""
    register(MetricSpec.from_module(metric, protocol=metric.PROTOCOL))
