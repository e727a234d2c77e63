"""Adversarial robustness of a trained torch classifier: FGSM, PGD and DeepFool over an ε grid.

Inputs are images in [0, 1]; docs/clusterability.md gives the threat models. Inputs,
gradients and adversarial examples are checked finite: a non-finite value raises
:class:`robench.data.boundary.NonFiniteError` naming the attack, ε and the count.
"""

from __future__ import annotations

import contextlib
import logging

import numpy as np

from robench.data.boundary import NonFiniteError, check_finite
from robench.learn.devices import module_device

ATTACKS = ("fgsm", "pgd", "deepfool")


def _torch_inputs(X):
    import torch

    return torch.from_numpy(np.ascontiguousarray(X, dtype=np.float32))


def _predict(module, X, batch: int = 256) -> np.ndarray:
    import torch

    module.eval()
    device = module_device(module)
    with torch.no_grad():
        out = [module(X[s:s + batch].to(device)).argmax(1).cpu()
               for s in range(0, X.shape[0], batch)]
    return torch.cat(out).numpy() if out else np.zeros(0, dtype=np.int64)


def _grad_sign(module, x, y, what: str = "attack"):
    import torch

    x = x.clone().requires_grad_(True)
    loss = torch.nn.functional.cross_entropy(module(x), y, reduction="sum")
    (grad,) = torch.autograd.grad(loss, x)
    # torch.sign(nan) is 0: a NaN gradient (NaN logits or loss) would silently leave the input
    # unperturbed and report the clean accuracy as robust accuracy. Refuse it instead.
    bad = int((~torch.isfinite(grad.reshape(len(grad), -1))).any(1).sum())
    if bad:
        raise NonFiniteError(f"{what}: the loss gradient is non-finite (NaN or inf) for {bad} "
                             f"of {len(grad)} inputs; the model's logits or loss are not finite")
    return grad.sign()


def _batched(module, X, y, batch: int, attack) -> np.ndarray:
    """Return ``attack(x, y)`` of every batch of flat inputs on the module's device."""
    import torch

    X, y = _torch_inputs(X), torch.as_tensor(np.asarray(y), dtype=torch.long)
    module.eval()
    device = module_device(module)
    out = [attack(X[s:s + batch].to(device), y[s:s + batch].to(device)).detach().cpu()
           for s in range(0, X.shape[0], batch)]
    return torch.cat(out).numpy() if out else np.zeros_like(np.asarray(X))


def fgsm(module, X, y, eps: float, batch: int = 256) -> np.ndarray:
    """Return FGSM adversarial examples of flat inputs ``X`` (L∞ radius ``eps``, in [0, 1])."""
    what = f"attack 'fgsm' at eps={eps}"
    adv = _batched(module, X, y, batch,
                   lambda xb, yb: (xb + eps * _grad_sign(module, xb, yb, what)).clamp(0.0, 1.0))
    return check_finite(adv, what)


def pgd(module, X, y, eps: float, steps: int = 10, batch: int = 256) -> np.ndarray:
    """Return L∞ PGD adversarial examples (no random start, step 2.5·eps/steps)."""
    import torch

    alpha = 2.5 * eps / max(int(steps), 1)

    def attack(x0, yb):
        x = x0.clone()
        for _ in range(int(steps)):
            x = x + alpha * _grad_sign(module, x, yb, f"attack 'pgd' at eps={eps}")
            x = torch.min(torch.max(x, x0 - eps), x0 + eps).clamp(0.0, 1.0).detach()
        return x

    adv = _batched(module, X, y, batch, attack)
    return check_finite(adv, f"attack 'pgd' at eps={eps} ({int(steps)} steps)")


def deepfool_norms(module, X, n_classes: int, *, max_iter: int = 50, overshoot: float = 0.02,
                   nb_grads: int = 10, batch: int = 128) -> tuple:
    """Return (per-pixel L2 norm ‖δ‖₂/√D of DeepFool's perturbation, prediction on x + δ).

    ART's DeepFool runs on the module's CUDA device; ART has no Metal backend, so a module on
    ``mps`` is attacked on the CPU and moved back.
    """
    import torch
    from art.attacks.evasion import DeepFool
    from art.estimators.classification import PyTorchClassifier

    logging.getLogger("art").setLevel(logging.ERROR)
    X = np.ascontiguousarray(X, dtype=np.float32)
    device = module_device(module)
    cuda = device.type == "cuda"
    try:
        # ART puts the model on torch.cuda.current_device() for "gpu": make it the module's.
        with torch.cuda.device(device) if cuda else contextlib.nullcontext():
            clf = PyTorchClassifier(model=module, loss=torch.nn.CrossEntropyLoss(),
                                    input_shape=(X.shape[1],), nb_classes=int(n_classes),
                                    clip_values=(0.0, 1.0),
                                    device_type="gpu" if cuda else "cpu")
            attack = DeepFool(clf, max_iter=int(max_iter), epsilon=float(overshoot),
                              nb_grads=int(min(nb_grads, n_classes)), batch_size=int(batch),
                              verbose=False)
            x_adv = check_finite(attack.generate(X).astype(np.float32), "attack 'deepfool'")
    finally:
        module.to(device)  # ART moved it to its own device (the CPU for a module on mps)
    norms = np.sqrt(((x_adv - X) ** 2).sum(1) / X.shape[1])
    return norms, _predict(module, torch.from_numpy(x_adv))


def robust_accuracies(module, X, y, n_classes: int, epsilons, *, attacks=ATTACKS,
                      pgd_steps: int = 10, deepfool_iter: int = 50,
                      deepfool_grads: int = 10) -> dict:
    """Return {"clean": acc, attack: {eps: robust accuracy}} on flat inputs in [0, 1]."""
    import torch

    y = np.asarray(y)
    check_finite(np.asarray(X), "input of the attacks (before attacking)")
    clean_pred = _predict(module, _torch_inputs(X))
    correct = clean_pred == y
    out = {"clean": float(correct.mean()) if y.size else None}
    for attack in attacks:
        res = {}
        if attack == "deepfool":
            norms, adv_pred = deepfool_norms(module, X, n_classes, max_iter=deepfool_iter,
                                             nb_grads=deepfool_grads)
            flipped = adv_pred != y
            res = {str(eps): float((correct & ~(flipped & (norms <= eps))).mean())
                   for eps in epsilons}
            out["deepfool_median_norm"] = (float(np.median(norms[correct])) if correct.any()
                                           else None)
        else:
            for eps in epsilons:
                adv = fgsm(module, X, y, eps) if attack == "fgsm" else pgd(module, X, y, eps,
                                                                          steps=pgd_steps)
                pred = _predict(module, torch.from_numpy(adv))
                # A sample counts only if it was correct clean too (an attack never "fixes" one).
                res[str(eps)] = float((correct & (pred == y)).mean())
        out[attack] = res
    return out
