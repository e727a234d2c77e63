"""A bad plugin is isolated, never fatal (issue 30, point 4): whatever an installed plugin does at
import or in a hook (wrong types, PluginError, GeneratorExit, KeyboardInterrupt, SystemExit,
os._exit, hanging), only that plugin is disabled, `robench plugins` says why, and the rest
runs."""

from __future__ import annotations

import time

from tests.reliability.cli import robench_env, rows, run

HEADER = "from robench import hookimpl\nfrom robench.specs import DatasetSpec, ModelSpec\n"

#: name -> (module code, what `robench plugins` must say about it)
PLUGINS = {
    "gives-a-string": ("@hookimpl\ndef register_models(register):\n    register('a string')\n",
                       "registered 'a string' with register_models; expected a ModelSpec"),
    "gives-none": ("@hookimpl\ndef register_models(register):\n    register(None)\n",
                   "registered None with register_models; expected a ModelSpec"),
    "gives-a-dataset": ("@hookimpl\ndef register_models(register):\n"
                        "    register(DatasetSpec('x', lambda: None, 'x'))\n",
                        "with register_models; expected a ModelSpec"),
    "raises-plugin-error": ("from robench.plugins import PluginError\n@hookimpl\n"
                            "def register_models(register):\n    raise PluginError('no models')\n",
                            "register_models raised PluginError: no models"),
    "generator-exit": ("@hookimpl\ndef register_clusterers(register):\n    raise GeneratorExit\n",
                       "register_clusterers raised GeneratorExit"),
    "interrupts-at-import": ("raise KeyboardInterrupt\n", "KeyboardInterrupt"),
    "exits-at-import": ("import sys\nsys.exit(0)\n", "SystemExit"),
    "os-exit-at-import": ("import os\nos._exit(0)\n", "ended robench's process while loading"),
    # stopped by the probe's deadline or its own alarm, whichever comes first: both say so
    "hangs-at-import": ("import time\ntime.sleep(100000)\n", "3 s (ROBENCH_PLUGIN_TIMEOUT"),
    "hangs-in-a-hook": ("import time\n@hookimpl\ndef register_models(register):\n"
                        "    time.sleep(100000)\n", "3 s (ROBENCH_PLUGIN_TIMEOUT"),
}


def install(site, name, code):
    """Install a plugin distribution NAME into ``site`` (a folder on PYTHONPATH)."""
    module = "hostile_" + name.replace("-", "_")
    (site / f"{module}.py").write_text(code)
    info = site / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[robench]\n{name} = {module}\n")


def test_each_bad_plugin_disables_only_itself_and_the_rest_runs(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    for name, (code, _) in PLUGINS.items():
        install(site, name, HEADER + code)
    install(site, "good", "from tests.plugins.tiny import register_datasets, register_models\n")
    env = {"PYTHONPATH": f"{site}:{robench_env(tmp_path)['PYTHONPATH']}",
           "ROBENCH_PLUGIN_TIMEOUT": 3}
    t0 = time.monotonic()
    shown = run(["plugins"], tmp_path, env=env, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "Traceback" not in shown.stdout + shown.stderr
    blocks = {}
    for line in shown.stdout.splitlines():
        if not line.startswith(" "):
            current = line.split()[0]
            blocks[current] = line
        else:
            blocks[current] += "\n" + line
    for name, (_, reason) in PLUGINS.items():
        assert " failed" in blocks[name] and reason in blocks[name], blocks.get(name)
    assert " ok" in blocks["good"] and "centroid" in blocks["good"]
    assert time.monotonic() - t0 < 90

    db = tmp_path / "r.db"
    done = run(["run", "-d", "tiny", "-m", "centroid", "-c", "kmeans", "--metric", "rho",
                "-r", "1", "-k", "2", "--executor", "local", "--db", str(db)], tmp_path,
               env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert rows(db, "SELECT status, COUNT(*) FROM trials GROUP BY status") == [("ok", 3)]
    assert "warning: plugin 'os-exit-at-import'" in done.stderr
