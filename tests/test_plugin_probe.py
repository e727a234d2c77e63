"""robench.plugin_probe: a judged set of plugins is judged once, then read from the cache."""

from __future__ import annotations

from types import SimpleNamespace

from robench import plugin_probe


def test_a_second_start_reads_the_verdicts_from_the_cache(tmp_path, monkeypatch):
    # The cache key stamps robench's own judging modules: one that moved (run/guard.py went to
    # process/guard.py) made every key fail, so every start probed again in a child process.
    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path))
    probed = []

    def probe_round(names, timeout):
        probed.append(list(names))
        return {name: None for name in names}, True

    monkeypatch.setattr(plugin_probe, "_probe_round", probe_round)
    eps = [SimpleNamespace(name="tiny", value="tests.plugins.tiny:plugin", dist=None)]
    assert plugin_probe.verdicts(eps) == {"tiny": None}
    assert plugin_probe.verdicts(eps) == {"tiny": None}
    assert probed == [["tiny"]], "the second start probed again instead of reading the cache"
    assert list((tmp_path / "plugins").glob("probe-*.json"))
