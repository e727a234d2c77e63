"""Where torch work runs: ``--device auto|cpu|cuda|cuda:N|mps``.

The driver resolves the device once (:func:`resolve_device`), every trial gets it in its
spec and makes it current (:func:`using_device`); torch code reads :func:`torch_device`.
With ``cuda`` and several GPUs worker i sees GPU i mod n. The device is in no key (each row
records it; docs/running.md says why).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys

from robench.errors import DeviceError  # noqa: F401 (public here too)

#: What ``--device`` accepts.
DEVICE_SYNTAX = "auto, cpu, cuda, cuda:N or mps"
_PATTERN = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")

#: The device torch work of this process goes to (set per trial by the executors).
_CURRENT = ["cpu"]
#: Environment variable the process executor sets in a worker it gave one GPU.
WORKER_GPU_ENV = "ROBENCH_WORKER_GPU"


def check_syntax(device: str) -> str:
    """Return ``device`` normalised (lowercase, stripped) or raise DeviceError."""
    text = str(device).strip().lower()
    if not _PATTERN.match(text):
        raise DeviceError(f"--device: '{device}' is not a device; use {DEVICE_SYNTAX}")
    return text


def _nvidia_possible() -> bool:
    # Importing torch costs seconds; on Linux without the NVIDIA driver (or WSL's GPU bridge)
    # no CUDA device can exist, so answer without it.
    if sys.platform.startswith("linux"):
        return any(os.path.exists(p) for p in ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/dxg"))
    return sys.platform != "darwin"


def cuda_count() -> int:
    """Return the number of CUDA GPUs this process can see (0 without the driver or torch)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "" or not _nvidia_possible():
        return 0
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def mps_available() -> bool:
    """Return whether Apple's Metal (MPS) backend is available."""
    if sys.platform != "darwin":
        return False
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return bool(torch.backends.mps.is_available())


def resolve_device(request: str = "auto") -> str:
    """Return the concrete device for ``request`` (``auto``: cuda, else mps, else cpu)."""
    device = check_syntax(request)
    if device == "auto":
        if cuda_count():
            return "cuda"
        return "mps" if mps_available() else "cpu"
    if device.startswith("cuda"):
        n = cuda_count()
        if n == 0:
            raise DeviceError(f"--device {device}: no CUDA GPU is visible to this process "
                              "(torch.cuda.is_available() is False); use --device cpu or auto")
        if ":" in device and int(device.split(":")[1]) >= n:
            raise DeviceError(f"--device {device}: only {n} CUDA GPU(s) are visible "
                              f"(cuda:0..cuda:{n - 1})")
    if device == "mps" and not mps_available():
        raise DeviceError("--device mps: Apple's Metal backend is not available here "
                          "(torch.backends.mps.is_available() is False); use --device cpu")
    return device


def current_device() -> str:
    """Return the device torch work of this process goes to (``cpu`` unless set)."""
    return _CURRENT[-1]


def set_device(device: str) -> None:
    """Make ``device`` (already resolved) the current device of this process."""
    _CURRENT[:] = [check_syntax(device) if device != "auto" else resolve_device(device)]


@contextlib.contextmanager
def using_device(device):
    """Make ``device`` the current device inside the ``with`` block (None: leave it)."""
    if not device:
        yield
        return
    previous = list(_CURRENT)
    set_device(device)
    try:
        yield
    finally:
        _CURRENT[:] = previous


def torch_device():
    """Return the current device as a ``torch.device`` (imports torch)."""
    import torch

    return torch.device(current_device())


def device_label(device=None) -> str:
    """Return what a trial row records as its device (plain ``cuda``: the worker's physical GPU)."""
    device = device or current_device()
    if device == "cuda":
        gpu = os.environ.get(WORKER_GPU_ENV)
        return f"cuda:{gpu}" if gpu else "cuda:0"
    return device


def worker_gpus(device: str, workers: int) -> list:
    """Return one ``CUDA_VISIBLE_DEVICES`` per worker (plain ``cuda``, several GPUs), else []."""
    n = cuda_count() if device == "cuda" else 0
    if n < 2:
        return []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = ([v.strip() for v in visible.split(",") if v.strip()][:n] if visible
           else [str(i) for i in range(n)])
    return [ids[i % len(ids)] for i in range(max(1, int(workers)))]


def claim_worker_gpu(gpu) -> None:
    """Restrict this (fresh) worker process to GPU ``gpu``; call before torch touches CUDA."""
    if gpu is None:
        return
    os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    os.environ[WORKER_GPU_ENV] = str(gpu)


def module_device(module):
    """Return the ``torch.device`` of a module's first parameter or buffer (CPU if none)."""
    import torch

    for tensor in module.parameters():
        return tensor.device
    for tensor in module.buffers():
        return tensor.device
    return torch.device("cpu")
