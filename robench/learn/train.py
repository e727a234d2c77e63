"""Train torch classifiers on flat float32 arrays, selecting the epoch on validation data only.

Imports torch: model factories import it inside ``build``, never the CLI's start-up path.
docs/data-and-models.md ("Training") has the loop's design.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
from typing import Optional

import numpy as np
import torch
from torch import nn

from robench.data import Rows
from robench.learn.devices import module_device, torch_device

#: Training budget where ``ModelContext.train`` leaves a key out (the quick one,
#: docs/data-and-models.md); its keys are the budget arguments of :class:`TorchClassifier`.
DEFAULT_TRAIN = {"max_epochs": 4, "patience": 2, "batch_size": 64, "lr": 2e-3,
                 "weight_decay": 0.0}

#: Rows per forward pass when evaluating (the fastest measured, docs/profile.md).
EVAL_BATCH_SIZE = 256

_interop_threads_set = False

#: The hook :meth:`TorchClassifier.fit` asks first: ``hook(clf, X, y, X_val, y_val)`` is True
#: when it fitted ``clf`` itself (robench.learn.batched, via :func:`fit_hook`; per context).
FIT_HOOK: contextvars.ContextVar = contextvars.ContextVar("robench_fit_hook", default=None)


@contextlib.contextmanager
def fit_hook(hook):
    """Make ``hook`` the one :meth:`TorchClassifier.fit` asks inside the ``with`` block."""
    token = FIT_HOOK.set(hook)
    try:
        yield
    finally:
        FIT_HOOK.reset(token)


def set_torch_threads(n: int) -> None:
    """Use ``n`` intra-op threads, and ``n`` inter-op threads if torch still allows it."""
    global _interop_threads_set
    n = max(1, int(n))
    torch.set_num_threads(n)
    if not _interop_threads_set:
        # torch accepts the inter-op pool size once, and only before any parallel work ran;
        # a later call raises RuntimeError, which only means the pool already exists.
        with contextlib.suppress(RuntimeError):
            torch.set_num_interop_threads(n)
        _interop_threads_set = True


# Executors ask for a fixed thread count per trial through the environment, so a worker that
# never trains a torch model never pays for importing torch (see robench.run.executors).
if os.environ.get("ROBENCH_TORCH_THREADS"):
    set_torch_threads(int(os.environ["ROBENCH_TORCH_THREADS"]))


def training_budget(train: dict) -> dict:
    """Return the training budget in ``train`` with defaults filled and unknown keys dropped."""
    train = train or {}
    return {key: train.get(key, default) for key, default in DEFAULT_TRAIN.items()}


def as_inputs(X):
    """Return rows as a tensor, uncopied where possible: float32, uint8 pixels as held, or Rows."""
    if isinstance(X, Rows):
        return X
    X = np.asarray(X)
    return torch.from_numpy(np.ascontiguousarray(X, None if X.dtype == np.uint8 else np.float32))


def _take(X, idx) -> torch.Tensor:
    """Return the rows ``idx`` (a tensor of positions, or a slice) of a tensor or of Rows."""
    if isinstance(X, Rows):
        return torch.from_numpy(X[idx if isinstance(idx, slice) else idx.numpy()])
    return X[idx]


def as_float(x: torch.Tensor) -> torch.Tensor:
    """Return a batch as float32: uint8 pixels / 255 rounded once, as ``pixels_to_float`` does."""
    return x.to(torch.float32).div_(255) if x.dtype == torch.uint8 else x


def as_labels(y) -> torch.Tensor:
    """Return class labels as an int64 tensor."""
    return torch.from_numpy(np.ascontiguousarray(y, dtype=np.int64))


class MLP(nn.Module):
    """Fully connected ReLU network on flat inputs; the last of ``hidden`` is the feature width."""

    def __init__(self, n_features: int, n_classes: int, hidden: tuple = (256, 128)):
        super().__init__()
        layers, width = [], n_features
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        self.body = nn.Sequential(*layers)
        self.feature_width = width
        self.head = nn.Linear(width, n_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Return the penultimate-layer activations of flat inputs ``x``."""
        return self.body(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return class logits for flat inputs ``x``."""
        return self.head(self.features(x))


class MaxPool2x2(nn.Module):
    """Take the maximum of each 2x2 window (stride 2, odd edges dropped, like ``MaxPool2d(2)``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Pool ``x`` of shape (N, C, H, W) to (N, C, H // 2, W // 2)."""
        # CPU max_pool2d is vectorised over channels-last memory only (docs/profile.md); a
        # no-op for ConvNet's activations, a conversion for NCHW inputs of other modules
        x = x.contiguous(memory_format=torch.channels_last)
        if x.requires_grad and torch.is_grad_enabled():
            return nn.functional.max_pool2d(x, 2)
        return _max_pool2x2_values(x)


def _max_pool2x2_values(x: torch.Tensor) -> torch.Tensor:
    """Return ``max_pool2d(x, 2)``'s values of channels-last ``x`` without computing indices."""
    n, c, h, w = x.shape
    p = x.permute(0, 2, 3, 1)[:, :h - h % 2, :w - w % 2]  # NHWC view, odd edges dropped
    cols = torch.maximum(p[:, :, 0::2], p[:, :, 1::2])
    return torch.maximum(cols[:, 0::2], cols[:, 1::2]).permute(0, 3, 1, 2)


class ConvNet(nn.Module):
    """Stack of conv-ReLU-maxpool blocks, one ReLU fully connected layer and a linear head."""

    def __init__(self, image_shape: tuple, n_classes: int, channels: tuple = (32, 64),
                 fc_width: int = 128):
        super().__init__()
        self.image_shape = tuple(int(s) for s in image_shape)
        c_in, h, w = self.image_shape
        blocks = []
        for c_out in channels:
            blocks.append(nn.Conv2d(c_in, c_out, kernel_size=3, padding=1))
            if min(h, w) // 2 >= 2:
                # ReLU and max commute, so pooling first gives the same values and gradients
                # as conv-ReLU-pool while ReLU touches a quarter of the activations.
                blocks.append(MaxPool2x2())
                h, w = h // 2, w // 2
            blocks.append(nn.ReLU())
            c_in = c_out
        self.conv = nn.Sequential(*blocks)
        with torch.no_grad():
            n_flat = self.conv(torch.zeros(1, *self.image_shape)).numel()
        self.fc = nn.Sequential(nn.Flatten(), nn.Linear(n_flat, fc_width), nn.ReLU())
        self.feature_width = fc_width
        self.head = nn.Linear(fc_width, n_classes)
        # One memory layout end to end: conv weights and (in _images) inputs channels-last,
        # so no layer converts (docs/profile.md); the kernels round differently from
        # version 2's, so the models built on this class carry version 3.
        self.to(memory_format=torch.channels_last)

    def _images(self, x: torch.Tensor) -> torch.Tensor:
        """Return flat rows ``x`` as a channels-last (N, C, H, W) batch."""
        return x.view(x.shape[0], *self.image_shape).contiguous(memory_format=torch.channels_last)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Return the penultimate-layer activations of flat image rows ``x``."""
        return self.fc(self.conv(self._images(x)))

    def conv_features(self, x: torch.Tensor) -> torch.Tensor:
        """Return the last convolutional block's output (after its pool and ReLU), flattened."""
        return self.conv(self._images(x)).flatten(1)

    def from_conv_features(self, z: torch.Tensor) -> torch.Tensor:
        """Return class logits from flattened :meth:`conv_features` ``z`` (the rest of the net)."""
        return self.head(self.fc(z))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return class logits for flat image rows ``x``."""
        return self.head(self.features(x))


class FusedAdam:
    """Adam with torch's fused kernel, bit for bit ``torch.optim.Adam(..., fused=True)``.

    Calls ``torch._fused_adam_`` with the same state without importing ``torch._dynamo``
    (seconds per worker); docs/profile.md has the figures, tests/learn/test_train.py the check.
    """

    def __init__(self, params, *, lr: float, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.state = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        groups = {}
        for p in self.params:
            if p.grad is None:
                continue
            state = self.state.get(p)
            if state is None:
                state = self.state[p] = (
                    torch.zeros((), dtype=torch.float32, device=p.device),
                    torch.zeros_like(p, memory_format=torch.preserve_format),
                    torch.zeros_like(p, memory_format=torch.preserve_format),
                )
            lists = groups.setdefault((p.device, p.dtype), ([], [], [], [], []))
            for lst, t in zip(lists, (p, p.grad, state[1], state[2], state[0])):
                lst.append(t)
        for params, grads, exp_avgs, exp_avg_sqs, steps in groups.values():
            torch._foreach_add_(steps, 1)
            torch._fused_adam_(params, grads, exp_avgs, exp_avg_sqs, [], steps, amsgrad=False,
                               lr=self.lr, beta1=self.betas[0], beta2=self.betas[1],
                               weight_decay=self.weight_decay, eps=self.eps, maximize=False,
                               grad_scale=None, found_inf=None)


class EpochLedger:
    """One model's epochs: its history, its best validation epoch and that epoch's weights."""

    def __init__(self, clf: "TorchClassifier"):
        self.clf = clf
        self.history: list = []
        self.best_key: Optional[tuple] = None
        self.best_state: Optional[dict] = None
        self.best_epoch, self.stale = 0, 0

    def close_epoch(self, loss_sum, correct, n: int, val_loss: float, val_accuracy: float,
                    snapshot) -> bool:
        """Record an epoch; return True when training stops (``patience``, ``max_epochs``).

        ``loss_sum``: sum of batch loss x rows; ``correct`` of ``n`` rows right; ``snapshot()``
        returns the weights, asked for a new best epoch only.
        """
        epoch = len(self.history) + 1
        self.history.append({"epoch": epoch, "train_loss": loss_sum / n,
                             "train_accuracy": correct / n, "val_loss": val_loss,
                             "val_accuracy": val_accuracy})
        if self.clf.epoch_callback is not None:
            self.clf._observe_epoch(epoch)
        # Compare accuracy first, then the negated loss, so a tie in accuracy goes to the
        # better-calibrated epoch; a full tie keeps the earlier epoch.
        key = (val_accuracy, -val_loss)
        if self.best_key is None or key > self.best_key:
            self.best_key, self.best_epoch, self.stale = key, epoch, 0
            self.best_state = snapshot()
        else:
            self.stale += 1
        return self.stale >= self.clf.patience or epoch >= self.clf.max_epochs

    def finish(self, module, device, Xt, yt) -> None:
        """Leave the classifier fitted: ``module`` restored to the best epoch, in eval mode."""
        clf = self.clf
        module.load_state_dict(self.best_state)
        module.eval()
        clf.module_, clf.device_, clf.history_ = module, str(device), self.history
        clf.best_epoch_, clf.n_epochs_ = self.best_epoch, len(self.history)
        clf.val_accuracy_ = self.best_key[0]
        clf.train_accuracy_ = clf._train_accuracy(Xt, yt)


class TorchClassifier:
    """Classifier that trains a torch module with Adam and validation-based early stopping.

    Parameters
    ----------
    build_module : callable
        Called with no arguments inside :meth:`fit`, after seeding. Returns an ``nn.Module``
        mapping flat float32 rows to logits, with a ``features`` method and a ``head`` (the final
        ``nn.Linear``); a ``penalty(n_train)`` method, if any, is added to every batch's loss.
    seed : int
        Seeds weight initialisation and the per-epoch shuffling.
    max_epochs : int
        Upper bound on training epochs.
    patience : int
        Stop after this many consecutive epochs without a better validation result.
    batch_size : int
        Training mini-batch size.
    lr : float
        Adam learning rate.
    weight_decay : float
        Adam weight decay.
    epoch_callback : callable or None
        Called as ``epoch_callback(self, epoch)`` after every epoch; a returned dict is added to
        that epoch's ``history_`` entry (existing keys kept). It cannot steer: stopping reads
        validation alone and torch's random state is restored after the call.

    Attributes
    ----------
    module_ : nn.Module
        The trained module, holding the weights of the best validation epoch.
    history_ : list of dict
        Per epoch: ``epoch`` (1-based), ``train_loss``, ``train_accuracy`` (while training),
        ``val_loss``, ``val_accuracy``.
    best_epoch_ : int
        Epoch whose weights were restored.
    n_epochs_ : int
        Epochs actually run.
    train_accuracy_ : float or None
        Accuracy of the restored module on the training data; None when deferred.
    defer_train_accuracy : bool
        True: ``fit`` skips its pass over the training rows and the caller derives the accuracy
        from its own prediction (:func:`robench.run.trials.fit_and_score`); a subclass that
        overrides ``predict`` always gets the pass.
    val_accuracy_ : float
        Validation accuracy of the restored module.
    device_ : str
        The torch device it trained on (:mod:`robench.learn.devices`); results come back on the
        CPU as numpy arrays.
    """

    has_features = True
    #: uint8 rows are accepted as pixels (value / 255) and converted per batch, so a worker
    #: holds the data at a quarter of float32's size (robench.run.trials.fit_and_score).
    accepts_uint8 = True
    #: ``fit``, ``predict`` and ``features`` accept :class:`robench.data.Rows` (views of a
    #: data set's rows) and read one mini-batch at a time: no copy of a split is made.
    accepts_rows = True

    def __init__(self, build_module, *, seed: int, max_epochs: int, patience: int,
                 batch_size: int, lr: float, weight_decay: float = 0.0,
                 epoch_callback=None):
        self.build_module, self.seed, self.epoch_callback = build_module, seed, epoch_callback
        self.max_epochs, self.patience, self.batch_size = max_epochs, patience, batch_size
        self.lr, self.weight_decay = lr, weight_decay
        self.defer_train_accuracy = False

    @classmethod
    def from_context(cls, ctx, build_module, **overrides) -> "TorchClassifier":
        """Return an untrained classifier for the trial ``ctx`` describes.

        Parameters
        ----------
        ctx : robench.specs.ModelContext
            What robench tells the model factory about the trial (budget from ``ctx.train``,
            :func:`training_budget`; seed from ``ctx.seed``).
        build_module : callable
            Called as ``build_module(ctx)`` inside :meth:`fit`; returns a fresh ``nn.Module``.
        **overrides
            Constructor arguments that win over the context (``lr=1e-3``, ``seed``, ...).

        Returns
        -------
        TorchClassifier
            Its ``build_module`` is ``functools.partial(build_module, ctx)``.
        """
        params = {"seed": ctx.seed, **training_budget(ctx.train), **overrides}
        return cls(functools.partial(build_module, ctx), **params)

    def __repr__(self) -> str:
        budget = ", ".join(f"{name}={getattr(self, name)}" for name in ("seed", *DEFAULT_TRAIN))
        return f"TorchClassifier({budget})"

    def fit(self, X, y, X_val, y_val) -> "TorchClassifier":
        """Train on (X, y), stop early and pick the restored epoch on (X_val, y_val) alone."""
        hook = FIT_HOOK.get()
        if hook is not None and hook(self, X, y, X_val, y_val):
            return self  # trained together with others (robench.learn.batched)
        if X_val is None or len(X_val) == 0:
            raise ValueError("TorchClassifier.fit needs a non-empty validation split for early "
                             "stopping; carve it from the training partition, never from the "
                             "test partition")
        if self.max_epochs < 1 or self.patience < 1 or self.batch_size < 1:
            raise ValueError("max_epochs, patience and batch_size must all be >= 1")

        torch.manual_seed(self.seed)
        device = torch_device()
        module = self.build_module().to(device)
        generator = torch.Generator().manual_seed(self.seed)
        optimizer = FusedAdam(module.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        Xt, yt = as_inputs(X), as_labels(y)
        Xv, yv = as_inputs(X_val), as_labels(y_val)
        ledger = EpochLedger(self)
        # set before the first epoch: validation and an epoch_callback read them
        self.module_, self.device_, self.history_ = module, str(device), ledger.history
        stop = False
        while not stop:
            loss_sum, correct = self._train_epoch(optimizer, Xt, yt, generator, device)
            val_loss, val_acc = self._loss_and_accuracy(Xv, yv)
            stop = ledger.close_epoch(loss_sum, correct, Xt.shape[0], val_loss, val_acc,
                                      lambda: {k: v.detach().clone()
                                               for k, v in module.state_dict().items()})
        ledger.finish(module, device, Xt, yt)
        return self

    def _train_epoch(self, optimizer, Xt, yt, generator, device) -> tuple:
        """Run one epoch of mini-batch steps; return (sum of batch loss x rows, rows right)."""
        module = self.module_
        module.train()
        n = Xt.shape[0]
        penalty = getattr(module, "penalty", None)
        order = torch.randperm(n, generator=generator)
        loss_sum, correct = 0.0, 0
        for start in range(0, n, self.batch_size):
            idx = order[start:start + self.batch_size]
            # Batches move to the device one at a time (a no-op on the CPU), so the
            # training set itself never has to fit in GPU memory.
            xb, yb = as_float(_take(Xt, idx).to(device)), yt[idx].to(device)
            logits = module(xb)
            loss = nn.functional.cross_entropy(logits, yb)
            if penalty is not None:
                loss = loss + penalty(n)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            loss_sum += loss.item() * len(idx)
            correct += int((logits.argmax(1) == yb).sum())
        return loss_sum, correct

    def _train_accuracy(self, Xt, yt) -> Optional[float]:
        """Return the accuracy on the training rows; None if deferred (see the class doc)."""
        if getattr(self, "defer_train_accuracy", False) and \
                type(self).predict is TorchClassifier.predict:
            return None
        return self._loss_and_accuracy(Xt, yt)[1]

    def _observe_epoch(self, epoch: int) -> None:
        """Run ``epoch_callback`` without letting it touch training's random stream."""
        rng = torch.get_rng_state()
        try:
            extra = self.epoch_callback(self, epoch)
        finally:
            torch.set_rng_state(rng)
        if extra:
            entry = self.history_[-1]
            entry.update({k: v for k, v in dict(extra).items() if k not in entry})

    def _check_fitted(self) -> None:
        if not hasattr(self, "module_"):
            raise RuntimeError("this TorchClassifier is not fitted yet; call fit() first")

    def _batched(self, fn, X: torch.Tensor) -> torch.Tensor:
        """Apply ``fn`` to ``X`` in evaluation batches, in eval mode without autograd."""
        self.module_.eval()
        # max(..., 1) makes an empty X produce one empty batch, hence a (0, width) result.
        starts = range(0, max(X.shape[0], 1), EVAL_BATCH_SIZE)
        device = module_device(self.module_)
        with torch.inference_mode():
            out = None
            for s in starts:
                part = fn(as_float(_take(X, slice(s, s + EVAL_BATCH_SIZE)).to(device)))
                if out is None:  # filled in place: a joined list grew RSS (data-and-models.md)
                    out = torch.empty((X.shape[0],) + tuple(part.shape[1:]), dtype=part.dtype,
                                      device=part.device)
                out[s:s + part.shape[0]] = part
                del part
            return out.cpu()

    def _loss_and_accuracy(self, X: torch.Tensor, y: torch.Tensor) -> tuple:
        logits = self._batched(self.module_, X)
        loss = nn.functional.cross_entropy(logits, y).item()
        accuracy = (logits.argmax(1) == y).double().mean().item()
        return loss, accuracy

    def predict(self, X) -> np.ndarray:
        """Return the predicted class of each row of ``X`` as int64."""
        self._check_fitted()
        return self._batched(self.module_, as_inputs(X)).argmax(1).numpy().astype(np.int64)

    def predict_proba(self, X) -> np.ndarray:
        """Return softmax class probabilities, one row per row of ``X``."""
        self._check_fitted()
        logits = self._batched(self.module_, as_inputs(X))
        return torch.softmax(logits, dim=1).numpy()

    def features(self, X) -> np.ndarray:
        """Return the penultimate-layer features of each row of ``X``."""
        self._check_fitted()
        return self._batched(self.module_.features, as_inputs(X)).numpy()
