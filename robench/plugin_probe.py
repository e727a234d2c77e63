"""Try each installed plugin in a child process before loading it.

A plugin that ends, hangs or kills its process at import or in a hook disables only itself
(docs/guarantees.md). Verdicts are cached by robench's version, the interpreter and each
plugin's files, so the child runs again only after a plugin changes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import select
import subprocess
import sys
import time
from typing import Optional
from robench.data.cache import cache_dir, content_key
import robench

#: Seconds a plugin may take to import and register its components in the probe.
PLUGIN_TIMEOUT = 30.0
_MAX_FILES = 5000  # source files stamped per plugin package
_REASON_CHARS = 500


def plugin_timeout() -> float:
    """Return the plugin time limit: $ROBENCH_PLUGIN_TIMEOUT seconds, else PLUGIN_TIMEOUT."""
    try:
        value = float(os.environ.get("ROBENCH_PLUGIN_TIMEOUT", PLUGIN_TIMEOUT))
    except ValueError:
        return PLUGIN_TIMEOUT
    return value if 0 < value < 1e6 else PLUGIN_TIMEOUT


def describe(exc: BaseException) -> str:
    """Return ``Type: message`` of an exception a plugin raised, one line, bounded, never raising."""
    try:
        text = str(exc)
    except BaseException:  # noqa: BLE001 - a plugin's __str__ may raise anything
        text = "(its message could not be read)"
    text = " ".join(text.split())
    if len(text) > _REASON_CHARS:
        text = text[:_REASON_CHARS] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def shown(value, limit: int = 120) -> str:
    """Return ``repr(value)`` of something a plugin handed over, bounded, never raising."""
    try:
        text = repr(value)
    except BaseException:  # noqa: BLE001 - a plugin's __repr__ may raise anything
        text = f"a {type(value).__name__}"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _stamp(ep) -> list:
    """Return what identifies an entry point's code: its target, distribution and source files."""
    dist = getattr(ep, "dist", None)
    try:
        dist_id = [dist.metadata["Name"], dist.version, str(getattr(dist, "_path", ""))]
    except Exception:  # noqa: BLE001 - broken metadata is part of the stamp, not fatal
        dist_id = []
    files = []
    top = ep.value.split(":", 1)[0].split(".", 1)[0].strip()
    try:
        spec = importlib.util.find_spec(top)  # locates the module; never runs its code
    except BaseException:  # noqa: BLE001
        spec = None
    if spec is not None:
        roots = list(spec.submodule_search_locations or ())
        if spec.origin and os.path.isfile(spec.origin):
            files.append(spec.origin)
        for root in roots:
            for folder, dirs, names in os.walk(root):
                dirs.sort()
                files.extend(os.path.join(folder, n) for n in sorted(names) if n.endswith(".py"))
                if len(files) > _MAX_FILES:
                    break
    stats = []
    for path in files[:_MAX_FILES]:
        try:
            st = os.stat(path)
        except OSError:
            continue
        stats.append([path, st.st_size, st.st_mtime_ns])
    return [ep.name, ep.value, dist_id, stats]


def _cache_file(eps) -> Optional[str]:
    try:
        here = os.path.dirname(os.path.abspath(robench.__file__))
        own = []  # the code that judges: a changed robench judges again
        for rel in ("plugins.py", "plugin_probe.py", "specs.py", "hookspecs.py",
                    os.path.join("process", "guard.py")):
            st = os.stat(os.path.join(here, rel))
            own.append([rel, st.st_size, st.st_mtime_ns])
        key = content_key("plugin-probe", robench.__version__, sys.executable, own,
                          [_stamp(ep) for ep in eps])
        return str(cache_dir() / "plugins" / f"probe-{key}.json")
    except Exception:  # noqa: BLE001 - no cache: probe every time
        return None


def _read(path: Optional[str]) -> Optional[dict]:
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError, RecursionError):
        return None
    ok = isinstance(data, dict) and all(isinstance(v, (str, type(None))) for v in data.values())
    return data if ok else None


def _write(path: Optional[str], data: dict) -> None:
    if path is None:
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written only costs a probe next time


def verdicts(eps, timeout: Optional[float] = None) -> dict:
    """Return {entry point name: None if it loads and registers cleanly, else the reason}.

    A plugin the child could not judge is left out (loaded with the in-process guards only).
    """
    eps = list(eps)
    if not eps:
        return {}
    path = _cache_file(eps)
    cached = _read(path)
    if cached is not None and set(cached) == {ep.name for ep in eps}:
        return cached
    timeout = plugin_timeout() if timeout is None else timeout
    results: dict = {}
    complete, todo = True, [ep.name for ep in eps]
    while todo:
        got, finished = _probe_round(todo, timeout)
        if got is None:  # the child could not run at all: judge nothing
            return results
        results.update(got)
        left = [n for n in todo if n not in results]
        complete = complete and finished and len(left) < len(todo)
        if len(left) == len(todo):  # no progress: never loop for ever
            break
        todo = left
    if complete:
        _write(path, results)
    return results


def _probe_round(names: list, timeout: float) -> tuple:
    """Run one child over ``names``; return ({name: verdict}, whether it ended normally)."""
    read_fd, write_fd = os.pipe()
    env = {**os.environ, "ROBENCH_PROBE_FD": str(write_fd)}
    try:
        # the child imports this robench, wherever it is, whatever folder it starts in
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        code = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
                "from robench.plugins import probe_child; sys.exit(probe_child(sys.argv[1:]))")
        proc = subprocess.Popen(
            [sys.executable, "-c", code, root, *names], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(write_fd,),
            env=env, start_new_session=False)
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return None, False
    os.close(write_fd)
    results: dict = {}
    current, buffer, finished = None, b"", False
    deadline = time.monotonic() + timeout
    try:
        with os.fdopen(read_fd, "rb", buffering=0) as pipe:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    if current is not None:
                        results[current] = (f"hung: still loading after {timeout:g} s "
                                            "(ROBENCH_PLUGIN_TIMEOUT raises the limit), at "
                                            "import or in a hook")
                    break
                ready, _, _ = select.select([pipe], [], [], left)
                if not ready:
                    continue
                chunk = pipe.read(65536)
                if not chunk:  # the child ended
                    code = proc.wait()
                    if current is not None:
                        results[current] = (f"ended robench's process while loading (exit code "
                                            f"{code}; os._exit, a crash or a signal)")
                    finished = current is None
                    break
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    try:
                        event, name, reason = json.loads(line.decode("utf-8"))
                    except (ValueError, UnicodeDecodeError, TypeError):
                        continue
                    if event == "start":
                        current, deadline = name, time.monotonic() + timeout
                    elif event in ("ok", "failed") and name == current:
                        results[name] = None if event == "ok" else str(reason)
                        current = None
                    elif event == "interrupted":
                        return results, False
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return results, finished
