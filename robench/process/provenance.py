"""What a run records about where and when it ran: time, machine, versions, source revision.

Every result row traces back to its run (``runs`` table). Importable without torch.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import platform
import re
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from robench import __version__

#: Vector instruction sets, best first: torch and oneDNN pick kernels by the best one present,
#: and kernels for different sets may round differently in the last bit.
_VECTOR_ISAS = ("avx512f", "avx2", "avx", "asimd", "neon")


def utc_now() -> str:
    """Return the current time as an ISO 8601 UTC string with second precision."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def platform_description(cpuinfo: str = "/proc/cpuinfo") -> str:
    """Return the OS platform plus the CPU model and its best vector instruction set (from
    ``cpuinfo`` on Linux, else :func:`platform.processor`)."""
    model, flags = "", set()
    with contextlib.suppress(OSError), open(cpuinfo, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            key = key.strip().lower()
            if key in ("model name", "cpu model", "hardware") and not model:
                model = value.strip()
            elif key in ("flags", "features") and not flags:
                flags = set(value.split())
            if model and flags:
                break
    model = model or platform.processor() or platform.machine() or "unknown CPU"
    isa = next((name for name in _VECTOR_ISAS if name in flags), None)
    return f"{platform.platform()}; CPU: {model}" + (f", {isa}" if isa else "")


def torch_version() -> Optional[str]:
    """Return the installed torch version without importing torch, or None."""
    if (torch := sys.modules.get("torch")) is not None:
        return getattr(torch, "__version__", None)
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def git_revision() -> Optional[str]:
    """Return the git commit of the robench source tree, or None outside a checkout."""
    try:
        result = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent,
                                capture_output=True, text=True, timeout=3)
    except (OSError, subprocess.SubprocessError):
        return None
    rev = result.stdout.strip()
    return rev if result.returncode == 0 and rev else None


def run_environment() -> dict:
    """Return the columns of a run row that say where it ran: versions, platform, git revision."""
    return {"robench_version": __version__, "python": platform.python_version(),
            "platform": platform_description(), "torch_version": torch_version(),
            "git_rev": git_revision()}


# user:password@ in a URL, and the value of a secret-looking query parameter or option
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")
_SECRET_PARAMS = re.compile(r"(?P<name>(?:password|passwd|pwd|token|secret|api[_-]?key|"
                            r"access[_-]?key)=)[^&\s]+", re.IGNORECASE)


def redact_secrets(text):
    """Return ``text`` (a non-string unchanged) with credentials in URLs (``tls://user:pw@h``)
    and secret query values (``?token=...``) replaced by '***', so a run row never stores them."""
    if not isinstance(text, str):
        return text
    text = _URL_CREDENTIALS.sub(lambda m: m.group("scheme") + "***@", text)
    return _SECRET_PARAMS.sub(lambda m: m.group("name") + "***", text)
