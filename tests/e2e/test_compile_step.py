"""benchmarks/compile_step.py: the table's arithmetic (the arms themselves compile for minutes: run by hand)."""

from benchmarks.compile_step import ARMS, render, row


def arms(eager_ms: float, warm_ms: float, cold_s: float, warm_s: float) -> dict:
    return dict(zip(ARMS, ({"warmup_s": 1.0, "step_ms": eager_ms}, {"warmup_s": 1.0 + cold_s, "step_ms": 999.0},
                           {"warmup_s": 1.0 + warm_s, "step_ms": warm_ms})))


def test_break_even_is_the_warm_compile_over_what_a_step_saves():
    # 5 s of compile, 100 ms -> 50 ms a step: 100 updates to earn it back
    assert row("transformer", arms(100.0, 50.0, 90.0, 5.0)) == ["`transformer`", "100.0", "50.0", "0.50×", "90.0",
                                                                "5.0", "100"]


def test_a_compiled_step_no_faster_never_breaks_even():
    assert row("bahdanau", arms(100.0, 110.0, 360.0, 20.0))[-1] == "never"
    assert row("bahdanau", arms(100.0, 100.0, 360.0, 20.0))[-1] == "never"


def test_the_section_names_the_machine_the_load_and_each_family_s_graphs():
    results = {"bahdanau": arms(100.0, 90.0, 300.0, 10.0)}
    for arm in results["bahdanau"].values():
        arm.update(graphs=14, target_lengths=20)
    figures = {"machine": {"cpu": "Some CPU (avx2)"}, "date": "2026-11-29", "load_before": 2.5, "warmup": 8,
               "steps": 32, "recompile_limit": 8, "results": results}
    text = "\n".join(render(figures))
    assert "on Some CPU (avx2), one thread, load average 2.50 before" in text
    assert "at most 8 times" in text
    assert "| `bahdanau` | 100.0 | 90.0 | 0.90× | 300.0 | 10.0 | 1,000 | 14 (20 target lengths) |" in text
