"""Train many :class:`~robench.learn.train.TorchClassifier` of one architecture at once.

The repeats and partitions of one (data set, model) are independent trainings of the same
network on different rows. :func:`fit_many` stacks their weights (one leading "model" axis per
parameter) and runs every mini-batch step of all of them as one computation: an
:class:`~robench.learn.train.MLP` through batched matrix products, a
:class:`~robench.learn.train.ConvNet` through grouped convolutions and batched matrix products
(``vmap`` refuses its channels-last layout), any other module ``torch.func.vmap`` can run
through ``vmap`` over ``functional_call``; Adam runs fused over the stacked weights. Each model
keeps what it has when trained alone
(:meth:`TorchClassifier.fit`):

* its weights are initialised by ``torch.manual_seed(seed)`` and ``build_module()``, exactly as
  ``fit`` does, so a model starts from the very weights it would start from alone;
* its data order is its own: a ``torch.Generator`` seeded with its seed draws one permutation
  of its own training rows per epoch of its own, as ``fit`` does; models with different
  training-set sizes have different epoch lengths and each ends its epochs when its own rows
  are used up (a short last batch is padded and the padding weighted 0, so its loss is the mean
  over its real rows, as alone);
* its Adam state, validation after each of its epochs, early stopping (patience) and restored
  best epoch are its own; a model that stops leaves the stack and the rest continue.

Results agree with one-at-a-time training up to floating-point rounding (batched kernels sum
in another order), which early stopping can amplify into a different stopping epoch; the
accuracy distributions are the same (tests/learn/test_batched.py tests both).

After :func:`fit_many` every classifier is fitted as if its own ``fit`` had run: ``module_``
(its own module with the best epoch's weights), ``history_``, ``best_epoch_``, ``n_epochs_``,
``val_accuracy_``, ``train_accuracy_`` and ``device_``; prediction and features then run per
model as usual.

:func:`deferring` and :func:`replaying` let a caller run a trial's own code twice around one
batched training without changing that code: the first pass records the trial's first
``fit`` call and stops it (:class:`FitDeferred`), the second pass gets that call answered with
the model :func:`fit_many` trained (robench.run.batching does this for groups of trials).
"""

from __future__ import annotations

import contextlib
import copy
import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch
from torch import nn

from robench.data import Rows
from robench.learn.train import (EVAL_BATCH_SIZE, FIT_HOOKS, MLP, ConvNet, FusedAdam,
                                 MaxPool2x2, TorchClassifier, as_float, as_inputs, as_labels)
from robench.learn.devices import torch_device

class FitDeferred(Exception):
    """Raised by a ``fit`` call recorded by :func:`deferring` (the trial stops there)."""


class NotBatchable(Exception):
    """Raised by a ``fit`` call under :func:`deferring` that cannot be trained in a batch."""


@dataclass
class FitJob:
    """One model to train: the classifier and its training and validation rows."""

    clf: TorchClassifier
    X: object
    y: np.ndarray
    X_val: object
    y_val: np.ndarray
    #: torch's global random state right after the module was built (what ``fit`` leaves
    #: behind for the code after it); set by :func:`fit_many`.
    rng_after: Optional[torch.Tensor] = field(default=None, repr=False)


# --- deferring a trial's fit and replaying it ------------------------------------------------

@contextlib.contextmanager
def deferring(jobs: list):
    """Record the first ``TorchClassifier.fit`` call in the block into ``jobs``, and stop there.

    The call raises :class:`FitDeferred` after appending its :class:`FitJob` (or
    :class:`NotBatchable` when :func:`batchable` says no: the caller trains that trial alone).
    """
    def hook(clf, X, y, X_val, y_val):
        if not batchable(clf):
            raise NotBatchable(f"{type(clf).__name__} cannot be trained in a batch")
        jobs.append(FitJob(clf, X, y, X_val, y_val))
        raise FitDeferred()

    FIT_HOOKS.append(hook)
    try:
        yield
    finally:
        FIT_HOOKS.pop()


@contextlib.contextmanager
def replaying(job: FitJob):
    """Answer the first ``TorchClassifier.fit`` call in the block with ``job``'s trained model.

    The classifier gets ``job.clf``'s fitted attributes (and torch's global random state is
    left as ``fit`` would leave it); later calls, and a call with another seed or other row
    counts than the deferred one, train as usual.
    """
    used = []

    def hook(clf, X, y, X_val, y_val):
        if used or not isinstance(clf, TorchClassifier):
            return False
        used.append(True)
        if len(X) != len(job.X) or len(X_val) != len(job.X_val) or clf.seed != job.clf.seed:
            return False  # not the call that was deferred (another seed or other rows): train
        for name in ("module_", "history_", "best_epoch_", "n_epochs_", "val_accuracy_",
                     "train_accuracy_", "device_"):
            setattr(clf, name, getattr(job.clf, name))
        if clf.train_accuracy_ is None and not clf.defer_train_accuracy:
            clf.train_accuracy_ = clf._loss_and_accuracy(as_inputs(X), as_labels(y))[1]
        if job.rng_after is not None:
            torch.set_rng_state(job.rng_after)
        return True

    FIT_HOOKS.append(hook)
    try:
        yield
    finally:
        FIT_HOOKS.pop()


# --- what can be batched ---------------------------------------------------------------------


def batchable(clf) -> bool:
    """Return whether ``clf`` trains exactly like :meth:`TorchClassifier.fit` (so may be batched).

    Its class must not override ``fit`` and it must have no ``epoch_callback`` (it would
    observe one model at a time). The module is checked by :func:`architecture`.
    """
    return (isinstance(clf, TorchClassifier) and type(clf).fit is TorchClassifier.fit
            and clf.epoch_callback is None and clf.max_epochs >= 1 and clf.patience >= 1
            and clf.batch_size >= 1)


def architecture(module: nn.Module) -> Optional[tuple]:
    """Return what must match for modules to train in one stack, or None if it cannot.

    The module's class and its parameters' names and shapes; modules with buffers (batch
    norm's running statistics) or a ``penalty`` (Bayesian layers sample weights) cannot.
    """
    if getattr(module, "penalty", None) is not None or any(True for _ in module.buffers()):
        return None
    return (type(module),) + tuple((n, tuple(p.shape)) for n, p in module.named_parameters())


# --- stacked forward passes --------------------------------------------------------------------


class _VmapForward:
    """logits[M, B, C] of M stacked models on x[M, B, F], via vmap over functional_call."""

    def __init__(self, module: nn.Module):
        from torch.func import functional_call, vmap

        base = copy.deepcopy(module).to("meta")
        self._call = vmap(lambda p, x: functional_call(base, p, (x,)))

    def __call__(self, params: dict, x: torch.Tensor) -> torch.Tensor:
        return self._call(params, x)


class _ConvNetForward:
    """logits[M, B, C] of M stacked :class:`ConvNet` models: grouped convolutions, bmm.

    The M models' channels sit side by side ([B, M*C, H, W]); a convolution with ``groups=M``
    applies each model's kernels to its own channels only, max-pool and ReLU act per channel,
    and the fully connected layers are batched matrix products over the model axis. Each
    model's flattening order is ConvNet's (channel, row, column).
    """

    def __init__(self, module: ConvNet):
        self.image_shape = module.image_shape
        self.steps = []
        for name, layer in module.conv.named_children():
            if isinstance(layer, nn.Conv2d):
                if layer.stride != (1, 1) or layer.dilation != (1, 1) or layer.groups != 1:
                    raise TypeError("only plain convolutions can be grouped")
                self.steps.append(("conv", f"conv.{name}", layer.padding))
            elif isinstance(layer, MaxPool2x2):
                self.steps.append(("pool", None, None))
            elif isinstance(layer, nn.ReLU):
                self.steps.append(("relu", None, None))
            else:
                raise TypeError(f"ConvNet layer {type(layer).__name__} is not batched")

    def __call__(self, params: dict, x: torch.Tensor) -> torch.Tensor:
        m, b = x.shape[:2]
        c, h, w = self.image_shape
        z = x.reshape(m, b, c, h, w).transpose(0, 1).reshape(b, m * c, h, w)
        if z.is_cuda:  # cuDNN's grouped convolutions are fastest on NHWC memory
            z = z.contiguous(memory_format=torch.channels_last)
        for kind, name, padding in self.steps:
            if kind == "conv":
                weight = params[name + ".weight"]
                z = nn.functional.conv2d(z, weight.reshape(-1, *weight.shape[2:]),
                                         params[name + ".bias"].reshape(-1), padding=padding,
                                         groups=m)
            elif kind == "pool":
                z = nn.functional.max_pool2d(z, 2)
            else:
                z = torch.relu(z)
        z = z.reshape(b, m, -1).transpose(0, 1)  # [M, B, C*h*w], each model's flattening
        z = torch.relu(torch.baddbmm(params["fc.1.bias"].unsqueeze(1), z,
                                     params["fc.1.weight"].transpose(1, 2)))
        return torch.baddbmm(params["head.bias"].unsqueeze(1), z,
                             params["head.weight"].transpose(1, 2))


class _MLPForward:
    """logits[M, B, C] of M stacked :class:`MLP` models: one batched matrix product a layer.

    What vmap computes for an MLP, without its per-call overhead (~20% of a step measured
    on one CPU thread).
    """

    def __init__(self, module: MLP):
        self.layers = []
        for name, layer in module.body.named_children():
            if isinstance(layer, nn.Linear):
                self.layers.append(f"body.{name}")
            elif not isinstance(layer, nn.ReLU):
                raise TypeError(f"MLP layer {type(layer).__name__} is not batched")

    def __call__(self, params: dict, x: torch.Tensor) -> torch.Tensor:
        for name in self.layers:
            x = torch.relu(torch.baddbmm(params[name + ".bias"].unsqueeze(1), x,
                                         params[name + ".weight"].transpose(1, 2)))
        return torch.baddbmm(params["head.bias"].unsqueeze(1), x,
                             params["head.weight"].transpose(1, 2))


def stacked_forward(module: nn.Module):
    """Return the stacked forward pass for models like ``module``."""
    if type(module) is ConvNet:
        return _ConvNetForward(module)
    if type(module) is MLP:
        return _MLPForward(module)
    return _VmapForward(module)


# --- the rows each model reads -----------------------------------------------------------------


def _tensor(X):
    X = as_inputs(X)
    return torch.from_numpy(np.asarray(X)) if isinstance(X, Rows) else X


class _Pool:
    """The rows of several models' splits, gathered once onto the device.

    Model i's local row j is pool row ``offsets[i] + j``; splits that are views of one data set
    share that data set's rows instead of copying each split.
    """

    def __init__(self, splits: list, labels: list, device):
        self.offsets = np.cumsum([0] + [len(s) for s in splits])[:-1]
        self.sizes = np.array([len(s) for s in splits])
        self.y = as_labels(np.concatenate([np.asarray(v) for v in labels])).to(device)
        shared = splits and all(isinstance(s, Rows) for s in splits) and \
            len({id(s.dataset) for s in splits}) == 1
        if shared:
            ds = splits[0].dataset
            rows = np.concatenate([np.arange(len(s)) if s.idx is None else s.idx
                                   for s in splits])
            used, where = np.unique(rows, return_inverse=True)
            self.X = torch.from_numpy(np.ascontiguousarray(ds.take(used))).to(device)
            self.rows = torch.from_numpy(where.astype(np.int64)).to(device)
        else:
            self.X = torch.cat([_tensor(s) for s in splits]).to(device)
            self.rows = None

    def take(self, local: torch.Tensor):
        """Return (inputs as float32, labels) of pool positions ``local`` (any shape)."""
        x = self.X[local if self.rows is None else self.rows[local]]
        return as_float(x), self.y[local]


# --- the batched training ----------------------------------------------------------------------


def fit_many(jobs: list, device=None) -> None:
    """Train every job's classifier in one batched computation (see the module docstring).

    All classifiers must be :func:`batchable`, build modules of one :func:`architecture` and
    share ``batch_size``, ``lr`` and ``weight_decay`` (``max_epochs`` and ``patience`` may
    differ); a ValueError says which does not. Each ``job.clf`` ends up fitted.
    """
    if not jobs:
        return

    device = torch.device(device) if device is not None else torch_device()
    first = jobs[0].clf
    for job in jobs:
        clf = job.clf
        if not batchable(clf):
            raise ValueError(f"{clf!r} cannot be trained in a batch")
        if (clf.batch_size, clf.lr, clf.weight_decay) != \
                (first.batch_size, first.lr, first.weight_decay):
            raise ValueError("models trained in one batch need one batch size, learning rate "
                             "and weight decay")
        if job.X_val is None or len(job.X_val) == 0 or len(job.X) == 0:
            raise ValueError("every model needs training rows and a non-empty validation split")
    modules = []
    for job in jobs:
        torch.manual_seed(job.clf.seed)  # the initial weights of fit(), exactly
        modules.append(job.clf.build_module().to(device))
        job.rng_after = torch.get_rng_state()
    arch = architecture(modules[0])
    if arch is None or any(architecture(m) != arch for m in modules[1:]):
        raise ValueError("models trained in one batch need one architecture without buffers")
    forward = stacked_forward(modules[0])
    names = [n for n, _ in modules[0].named_parameters()]
    params = {n: torch.stack([dict(m.named_parameters())[n].detach() for m in modules])
              .contiguous().requires_grad_() for n in names}
    # Every model in the stack has taken the same number of steps (they all step together
    # and a stopped one leaves), so Adam over the stacked tensors, with one step count, is
    # each model's own Adam: the fused kernel of FusedAdam, elementwise.
    optimizer = FusedAdam(params.values(), lr=float(first.lr),
                          weight_decay=float(first.weight_decay or 0.0))

    train = _Pool([j.X for j in jobs], [j.y for j in jobs], device)
    val = _Pool([j.X_val for j in jobs], [j.y_val for j in jobs], device)
    bs = int(first.batch_size)
    n = len(jobs)
    gens = [torch.Generator().manual_seed(j.clf.seed) for j in jobs]
    per_epoch = [math.ceil(int(s) / bs) for s in train.sizes]
    order = [None] * n  # each model's current epoch's permutation
    batch_no = [0] * n  # next batch of the current epoch
    epoch = [0] * n
    history = [[] for _ in range(n)]
    best = [None] * n  # (key, epoch, state)
    stale = [0] * n
    active = list(range(n))  # models still training, in stack order
    loss_sum = torch.zeros(n, dtype=torch.float64, device=device)  # as fit's Python floats
    correct = torch.zeros(n, device=device)
    pad = torch.arange(bs)
    while active:
        local, weight, ends = [], [], []
        for i in active:
            if batch_no[i] == 0:
                order[i] = torch.randperm(int(train.sizes[i]), generator=gens[i])
                epoch[i] += 1
            idx = order[i][batch_no[i] * bs:(batch_no[i] + 1) * bs]
            k = idx.numel()
            if k < bs:  # a short last batch: pad with the model's row 0, weighted 0
                idx = torch.cat([idx, torch.zeros(bs - k, dtype=idx.dtype)])
            local.append(idx + int(train.offsets[i]))
            weight.append((pad < k).float())
            batch_no[i] += 1
            ends.append(batch_no[i] == per_epoch[i])
        local = torch.stack(local).to(device, non_blocking=True)
        weight = torch.stack(weight).to(device, non_blocking=True)
        xb, yb = train.take(local)
        logits = forward(params, xb)
        per_row = nn.functional.cross_entropy(logits.flatten(0, 1), yb.flatten(),
                                              reduction="none").view_as(weight)
        counts = weight.sum(1)
        losses = (per_row * weight).sum(1) / counts
        optimizer.zero_grad(set_to_none=True)
        losses.sum().backward()  # models are independent: each gets its own gradient
        optimizer.step()
        with torch.no_grad():
            loss_sum += losses.detach().double() * counts.double()
            correct += ((logits.argmax(-1) == yb).float() * weight).sum(1)
        ended = [pos for pos, e in enumerate(ends) if e]
        if not ended:
            continue
        sel = torch.tensor(ended, device=device)
        val_loss, val_acc = _evaluate(forward, {k: v.detach()[sel] for k, v in params.items()},
                                      val, [active[pos] for pos in ended], device)
        sums, hits = loss_sum[sel].tolist(), correct[sel].tolist()
        loss_sum[sel] = 0
        correct[sel] = 0
        leaving = []
        for j, pos in enumerate(ended):
            i = active[pos]
            size = int(train.sizes[i])
            history[i].append({"epoch": epoch[i], "train_loss": sums[j] / size,
                               "train_accuracy": hits[j] / size, "val_loss": val_loss[j],
                               "val_accuracy": val_acc[j]})
            batch_no[i] = 0
            key = (val_acc[j], -val_loss[j])
            if best[i] is None or key > best[i][0]:
                state = {k: v.detach()[pos].clone() for k, v in params.items()}
                best[i], stale[i] = (key, epoch[i], state), 0
            else:
                stale[i] += 1
            clf = jobs[i].clf
            if stale[i] >= clf.patience or epoch[i] >= clf.max_epochs:
                leaving.append(pos)
        if leaving:
            keep = [pos for pos in range(len(active)) if pos not in leaving]
            active = [active[pos] for pos in keep]
            if active:
                kept = torch.tensor(keep, device=device)
                old = optimizer
                params = {k: v.detach()[kept].contiguous().requires_grad_()
                          for k, v in params.items()}
                optimizer = FusedAdam(params.values(), lr=old.lr, weight_decay=old.weight_decay)
                for before, after in zip(old.params, optimizer.params):
                    step, exp_avg, exp_avg_sq = old.state[before]
                    optimizer.state[after] = (step, exp_avg[kept].contiguous(),
                                              exp_avg_sq[kept].contiguous())
                loss_sum, correct = loss_sum[kept], correct[kept]

    for i, (job, module) in enumerate(zip(jobs, modules)):
        key, best_epoch, state = best[i]
        with torch.no_grad():
            for name, p in module.named_parameters():
                p.copy_(state[name])
        module.eval()
        clf = job.clf
        clf.module_ = module
        clf.device_ = str(device)
        clf.history_ = history[i]
        clf.best_epoch_ = best_epoch
        clf.n_epochs_ = len(history[i])
        clf.val_accuracy_ = key[0]
        if clf.defer_train_accuracy and type(clf).predict is TorchClassifier.predict:
            clf.train_accuracy_ = None
        else:
            clf.train_accuracy_ = clf._loss_and_accuracy(as_inputs(job.X), as_labels(job.y))[1]


@torch.no_grad()
def _evaluate(forward, params, pool: _Pool, models: list, device) -> tuple:
    """Return per-model (mean loss, accuracy) on each model's validation rows (lists)."""
    sizes = [int(pool.sizes[i]) for i in models]
    longest = max(sizes)
    loss = torch.zeros(len(models), dtype=torch.float64, device=device)
    hits = torch.zeros(len(models), dtype=torch.float64, device=device)
    for start in range(0, longest, EVAL_BATCH_SIZE):
        width = min(EVAL_BATCH_SIZE, longest - start)
        cols = torch.arange(start, start + width)
        local, weight = [], []
        for i, size in zip(models, sizes):
            valid = cols < size
            local.append(torch.where(valid, cols, 0) + int(pool.offsets[i]))
            weight.append(valid)
        local = torch.stack(local).to(device)
        weight = torch.stack(weight).to(device)
        x, y = pool.take(local)
        logits = forward(params, x)
        per_row = nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten(),
                                              reduction="none").view_as(local)
        loss += torch.where(weight, per_row, 0).double().sum(1)
        hits += ((logits.argmax(-1) == y) & weight).double().sum(1)
    n = torch.tensor(sizes, dtype=torch.float64, device=device)
    return (loss / n).tolist(), (hits / n).tolist()
