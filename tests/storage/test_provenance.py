"""Tests for what a run records about where it ran."""

from robench.process.provenance import platform_description, run_environment


def test_platform_description_names_cpu_model_and_best_vector_isa(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Example CPU 9000\n"
                       "flags\t\t: fpu sse2 avx avx2 avx512f fma\n\n"
                       "processor\t: 1\nmodel name\t: Example CPU 9000\n")
    assert platform_description(str(cpuinfo)).endswith("; CPU: Example CPU 9000, avx512f")
    cpuinfo.write_text("model name\t: Older CPU\nflags\t: fpu sse2 avx\n")
    assert platform_description(str(cpuinfo)).endswith("; CPU: Older CPU, avx")
    # no cpuinfo (macOS, Windows): still names the platform and some processor
    assert "; CPU: " in platform_description(str(tmp_path / "missing"))




def test_run_environment_names_every_environment_column_of_a_run():
    from robench import __version__
    from robench.storage.store import COLUMNS

    env = run_environment()
    assert set(env) <= set(COLUMNS["runs"])
    assert env["robench_version"] == __version__ and env["python"] and "; CPU: " in env["platform"]
