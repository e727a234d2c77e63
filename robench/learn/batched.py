"""Train many :class:`~robench.learn.train.TorchClassifier` of one architecture at once.

:func:`fit_many` stacks the models' weights along a leading axis and runs every step of all
of them as one computation; each model keeps its own seed, data order, Adam state and
:class:`~robench.learn.train.EpochLedger` (docs/performance.md, "Many models at once").
:func:`deferring` and :func:`replaying` run a trial's code twice around one batched training
(the contract is :class:`robench.specs.ProtocolSpec`'s).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch
from torch import nn

from robench.data import Rows
from robench.learn.train import (EVAL_BATCH_SIZE, MLP, ConvNet, EpochLedger, FusedAdam,
                                 MaxPool2x2, TorchClassifier, as_float, as_inputs, as_labels,
                                 fit_hook)
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


def deferring(jobs: list):
    """Record the first ``TorchClassifier.fit`` in the block into ``jobs`` and stop the trial there."""
    def hook(clf, X, y, X_val, y_val):
        if not batchable(clf):
            raise NotBatchable(f"{type(clf).__name__} cannot be trained in a batch")
        jobs.append(FitJob(clf, X, y, X_val, y_val))
        raise FitDeferred()

    return fit_hook(hook)


def replaying(job: FitJob):
    """Answer the first ``TorchClassifier.fit`` in the block with ``job``'s trained model."""
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
        if clf.train_accuracy_ is None:
            clf.train_accuracy_ = clf._train_accuracy(as_inputs(X), as_labels(y))
        torch.set_rng_state(job.rng_after)  # as fit_many left it after building the module
        return True

    return fit_hook(hook)


def batchable(clf) -> bool:
    """Return whether ``clf`` trains exactly like :meth:`TorchClassifier.fit` (batchable)."""
    return (isinstance(clf, TorchClassifier) and type(clf).fit is TorchClassifier.fit
            and clf.epoch_callback is None and clf.max_epochs >= 1 and clf.patience >= 1
            and clf.batch_size >= 1)


def architecture(module: nn.Module) -> Optional[tuple]:
    """Return what must match for modules to train in one stack, or None if it cannot.

    Modules with buffers (batch norm) or a ``penalty`` (Bayesian layers) cannot.
    """
    if getattr(module, "penalty", None) is not None or any(True for _ in module.buffers()):
        return None
    return (type(module),) + tuple((n, tuple(p.shape)) for n, p in module.named_parameters())


def _linear(params: dict, name: str, x: torch.Tensor) -> torch.Tensor:
    """Return every stacked model's layer ``name`` applied to its rows x[M, B, in]."""
    return torch.baddbmm(params[name + ".bias"].unsqueeze(1), x,
                         params[name + ".weight"].transpose(1, 2))


class _ConvNetForward:
    """logits[M, B, C] of M stacked :class:`ConvNet` models: grouped convolutions, bmm.

    The models' channels sit side by side ([B, M*C, H, W]); ``groups=M`` keeps each model's
    kernels on its own channels; each model's flattening order is ConvNet's.
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
        return _linear(params, "head", torch.relu(_linear(params, "fc.1", z)))


class _MLPForward:
    """logits[M, B, C] of M stacked :class:`MLP` models (vmap's result without ~20% overhead)."""

    def __init__(self, module: MLP):
        self.layers = []
        for name, layer in module.body.named_children():
            if isinstance(layer, nn.Linear):
                self.layers.append(f"body.{name}")
            elif not isinstance(layer, nn.ReLU):
                raise TypeError(f"MLP layer {type(layer).__name__} is not batched")

    def __call__(self, params: dict, x: torch.Tensor) -> torch.Tensor:
        for name in self.layers:
            x = torch.relu(_linear(params, name, x))
        return _linear(params, "head", x)


def stacked_forward(module: nn.Module):
    """Return the stacked forward pass for models like ``module``."""
    if type(module) is ConvNet:
        return _ConvNetForward(module)
    if type(module) is MLP:
        return _MLPForward(module)
    from torch.func import functional_call, vmap  # any other module: vmap over functional_call

    base = copy.deepcopy(module).to("meta")
    return vmap(lambda p, x: functional_call(base, p, (x,)))


class _Pool:
    """The rows of several models' splits, gathered once onto the device (model i's row j
    is pool row ``offsets[i] + j``)."""

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
            self.X = torch.cat([torch.from_numpy(np.asarray(s)) if isinstance(s, Rows)
                                else as_inputs(s) for s in splits]).to(device)
            self.rows = None

    def take(self, local: torch.Tensor):
        """Return (inputs as float32, labels) of pool positions ``local`` (any shape)."""
        x = self.X[local if self.rows is None else self.rows[local]]
        return as_float(x), self.y[local]


class _Member:
    """Model ``index`` of the jobs: its rows in the pool, its own data order and its ledger."""

    def __init__(self, index: int, job: FitJob, offset, size, batch_size: int):
        self.index, self.ledger = index, EpochLedger(job.clf)
        self.generator = torch.Generator().manual_seed(job.clf.seed)
        self.offset, self.size, self.batch_size = int(offset), int(size), batch_size
        self.per_epoch = math.ceil(self.size / batch_size)
        self.order, self.batch_no = None, 0  # this epoch's permutation, its next batch

    def next_batch(self) -> tuple:
        """Return (pool positions, row weights, ends an epoch) of the next batch (short: padded)."""
        bs = self.batch_size
        if self.batch_no == 0:
            self.order = torch.randperm(self.size, generator=self.generator)
        idx = self.order[self.batch_no * bs:(self.batch_no + 1) * bs]
        k = idx.numel()
        if k < bs:
            idx = torch.cat([idx, torch.zeros(bs - k, dtype=idx.dtype)])
        self.batch_no = (self.batch_no + 1) % self.per_epoch
        return idx + self.offset, (torch.arange(bs) < k).float(), self.batch_no == 0


class _Stack:
    """The stacked weights of the models still training, their Adam, their epoch sums."""

    def __init__(self, modules: list, lr: float, weight_decay: float, device):
        names = [n for n, _ in modules[0].named_parameters()]
        self.params = {n: torch.stack([dict(m.named_parameters())[n].detach()
                                       for m in modules]).contiguous().requires_grad_()
                       for n in names}
        # Every model in the stack has taken the same number of steps (they all step
        # together and a stopped one leaves), so Adam over the stacked tensors, with one step
        # count, is each model's own Adam: the fused kernel of FusedAdam, elementwise.
        self.optimizer = FusedAdam(self.params.values(), lr=lr, weight_decay=weight_decay)
        # as fit's Python floats
        self.loss_sum = torch.zeros(len(modules), dtype=torch.float64, device=device)
        self.correct = torch.zeros(len(modules), device=device)

    def step(self, forward, xb, yb, weight) -> None:
        """Take one Adam step of every model on its batch (rows weighted by ``weight``)."""
        logits = forward(self.params, xb)
        per_row = nn.functional.cross_entropy(logits.flatten(0, 1), yb.flatten(),
                                              reduction="none").view_as(weight)
        counts = weight.sum(1)
        losses = (per_row * weight).sum(1) / counts
        self.optimizer.zero_grad(set_to_none=True)
        losses.sum().backward()  # models are independent: each gets its own gradient
        self.optimizer.step()
        with torch.no_grad():
            self.loss_sum += losses.detach().double() * counts.double()
            self.correct += ((logits.argmax(-1) == yb).float() * weight).sum(1)

    def weights(self, sel) -> dict:
        """Return the stacked weights of the models at stack positions ``sel``."""
        return {k: v.detach()[sel] for k, v in self.params.items()}

    def take_sums(self, sel) -> tuple:
        """Return and reset the epoch's (loss sums, rows right) of positions ``sel``."""
        sums, hits = self.loss_sum[sel].tolist(), self.correct[sel].tolist()
        self.loss_sum[sel] = self.correct[sel] = 0
        return sums, hits

    def keep(self, kept) -> None:
        """Keep only the models at stack positions ``kept`` (with their Adam state)."""
        old = self.optimizer
        self.params = {k: v.detach()[kept].contiguous().requires_grad_()
                       for k, v in self.params.items()}
        self.optimizer = FusedAdam(self.params.values(), lr=old.lr,
                                   weight_decay=old.weight_decay)
        for before, after in zip(old.params, self.optimizer.params):
            step, exp_avg, exp_avg_sq = old.state[before]
            self.optimizer.state[after] = (step, exp_avg[kept].contiguous(),
                                           exp_avg_sq[kept].contiguous())
        self.loss_sum, self.correct = self.loss_sum[kept], self.correct[kept]


def _check_jobs(jobs: list) -> TorchClassifier:
    """Raise ValueError unless the jobs can train in one stack; return the first classifier."""
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
    return first


def _build(jobs: list, device) -> list:
    """Return each job's module with the initial weights ``fit`` gives it, on ``device``."""
    modules = []
    for job in jobs:
        torch.manual_seed(job.clf.seed)  # the initial weights of fit(), exactly
        modules.append(job.clf.build_module().to(device))
        job.rng_after = torch.get_rng_state()
    arch = architecture(modules[0])
    if arch is None or any(architecture(m) != arch for m in modules[1:]):
        raise ValueError("models trained in one batch need one architecture without buffers")
    return modules


def fit_many(jobs: list, device=None) -> None:
    """Train every job's classifier in one batched computation; each ``job.clf`` ends up fitted."""
    if not jobs:
        return
    device = torch.device(device) if device is not None else torch_device()
    first = _check_jobs(jobs)
    modules = _build(jobs, device)
    forward = stacked_forward(modules[0])
    stack = _Stack(modules, float(first.lr), float(first.weight_decay or 0.0), device)
    train = _Pool([j.X for j in jobs], [j.y for j in jobs], device)
    val = _Pool([j.X_val for j in jobs], [j.y_val for j in jobs], device)
    members = [_Member(i, job, offset, size, int(first.batch_size))
               for i, (job, offset, size) in enumerate(zip(jobs, train.offsets, train.sizes))]
    active = members  # the models still training, in stack order
    while active:
        local, weight, ends = zip(*(m.next_batch() for m in active))
        local, weight = (torch.stack(v).to(device, non_blocking=True) for v in (local, weight))
        stack.step(forward, *train.take(local), weight)
        ended = [pos for pos, end in enumerate(ends) if end]  # stack positions ending an epoch
        if ended:
            active = _close_epochs(stack, forward, val, active, ended, device)
    for job, module, member in zip(jobs, modules, members):
        member.ledger.finish(module, device, as_inputs(job.X), as_labels(job.y))


def _close_epochs(stack: _Stack, forward, val: _Pool, active: list, ended: list,
                  device) -> list:
    """Validate and record the members whose epoch ``ended``; return the members still training."""
    sel = torch.tensor(ended, device=device)
    val_loss, val_acc = _evaluate(forward, stack.weights(sel), val,
                                  [active[pos].index for pos in ended], device)
    sums, hits = stack.take_sums(sel)
    leaving = {pos for j, pos in enumerate(ended)
               if active[pos].ledger.close_epoch(
                   sums[j], hits[j], active[pos].size, val_loss[j], val_acc[j],
                   lambda pos=pos: {k: v.clone() for k, v in stack.weights(pos).items()})}
    keep = [pos for pos in range(len(active)) if pos not in leaving]
    if leaving and keep:
        stack.keep(torch.tensor(keep, device=device))
    return [active[pos] for pos in keep]


@torch.no_grad()
def _evaluate(forward, params, pool: _Pool, models: list, device) -> tuple:
    """Return per-model (mean loss, accuracy) on each model's validation rows (lists)."""
    sizes = [int(pool.sizes[i]) for i in models]
    longest = max(sizes)
    loss = torch.zeros(len(models), dtype=torch.float64, device=device)
    hits = torch.zeros(len(models), dtype=torch.float64, device=device)
    offsets = torch.tensor([int(pool.offsets[i]) for i in models])[:, None]
    for start in range(0, longest, EVAL_BATCH_SIZE):
        width = min(EVAL_BATCH_SIZE, longest - start)
        cols = torch.arange(start, start + width)
        valid = torch.stack([cols < size for size in sizes])
        local = (torch.where(valid, cols, 0) + offsets).to(device)
        weight = valid.to(device)
        x, y = pool.take(local)
        logits = forward(params, x)
        per_row = nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten(),
                                              reduction="none").view_as(local)
        loss += torch.where(weight, per_row, 0).double().sum(1)
        hits += ((logits.argmax(-1) == y) & weight).double().sum(1)
    n = torch.tensor(sizes, dtype=torch.float64, device=device)
    return (loss / n).tolist(), (hits / n).tolist()
