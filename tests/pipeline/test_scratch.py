"""scratch.py: a throw-away copy's params.yaml keeps only what its families run."""

from attention_lab.pipeline.scratch import drop_orphans


def test_drop_orphans_keeps_the_corpora_an_ablation_of_either_dict_names():
    params = {
        "tasks": ["translate"],
        "translate": {
            "families": ["bahdanau"],
            "corpora": {"monotone": {}, "uniform_lengths": {}, "unused": {}},
            "corpus_ablations": {
                "bahdanau_uniform_lengths": {"of": "bahdanau", "corpus": "uniform_lengths"},
                "luong_local_m_monotone": {"of": "luong_local_m", "corpus": "monotone"},
            },
            # an older params.yaml (a proof's base) keeps its corpus ablations here
            "ablations": {"bahdanau_monotone": {"of": "bahdanau", "corpus": "monotone"}},
        },
    }
    drop_orphans(params)
    section = params["translate"]
    assert sorted(section["corpus_ablations"]) == ["bahdanau_uniform_lengths"]
    assert sorted(section["ablations"]) == ["bahdanau_monotone"]
    assert sorted(section["corpora"]) == ["monotone", "uniform_lengths"]


def test_drop_orphans_keeps_the_replication_entries_of_what_it_kept():
    params = {
        "tasks": ["translate"],
        "translate": {
            "families": ["luong_dot"],
            "ablations": {
                "bahdanau_xavier": {"of": "bahdanau"},
                "luong_dot_x": {"of": "luong_dot"},
            },
            "replication": {"bahdanau": 4, "bahdanau_xavier": 4, "luong_dot": 8, "luong_dot_x": 3},
        },
    }
    drop_orphans(params)
    assert params["translate"]["replication"] == {"luong_dot": 8, "luong_dot_x": 3}
