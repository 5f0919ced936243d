"""batching.py: BucketBatchSampler's length buckets, seeded epochs and data-parallel split;
ResumableLoader's resume inside an epoch; data_parallel's (num_replicas, rank) of a trainer."""

from __future__ import annotations

import random
from itertools import pairwise

import pytest

from attention_lab.train.batching import BucketBatchSampler, ResumableLoader, data_parallel

# 103: a short last batch at every batch size used
LENGTHS = [random.Random(0).randint(1, 40) for _ in range(103)]


def batches(sampler: BucketBatchSampler, epoch: int = 0) -> list[list[int]]:
    sampler.set_epoch(epoch)
    return list(sampler)


def test_every_example_once_in_batches_of_similar_length():
    """One epoch holds every index exactly once, in len() batches of at most batch_size, each a run
    of the sorted lengths (no two batches' length ranges interleave); shuffle=False is the length
    order itself."""
    sampler = BucketBatchSampler(LENGTHS, batch_size=8, shuffle=True, seed=3)
    got = batches(sampler)
    assert sorted(i for b in got for i in b) == list(range(len(LENGTHS)))
    assert (
        len(got) == len(sampler) == 13
        and max(map(len, got)) == 8
        and min(map(len, got)) == 103 - 12 * 8
    )
    spans = sorted((min(LENGTHS[i] for i in b), max(LENGTHS[i] for i in b)) for b in got)
    assert all(hi <= next_lo for (_, hi), (next_lo, _) in pairwise(spans))
    plain = batches(BucketBatchSampler(LENGTHS, batch_size=8, shuffle=False, seed=3))
    assert [i for b in plain for i in b] == sorted(range(len(LENGTHS)), key=LENGTHS.__getitem__)


def test_order_depends_on_seed_and_epoch_only():
    """The same (seed, epoch) gives the same batches (an exact resume); another epoch or seed
    reshuffles them."""
    first = batches(BucketBatchSampler(LENGTHS, 8, True, seed=3), epoch=1)
    assert batches(BucketBatchSampler(LENGTHS, 8, True, seed=3), epoch=1) == first
    assert batches(BucketBatchSampler(LENGTHS, 8, True, seed=3), epoch=2) != first
    assert batches(BucketBatchSampler(LENGTHS, 8, True, seed=4), epoch=1) != first


@pytest.mark.parametrize("num_replicas", [2, 3])
def test_processes_together_see_the_global_batches_of_one_process(num_replicas):
    """Rank r takes every num_replicas-th example of one process's batches at batch_size ×
    num_replicas; every rank yields as many batches, none empty."""
    one = batches(BucketBatchSampler(LENGTHS, 4 * num_replicas, True, seed=5), epoch=2)
    ranks = [
        batches(BucketBatchSampler(LENGTHS, 4, True, 5, num_replicas, rank), epoch=2)
        for rank in range(num_replicas)
    ]
    assert all(
        len(r) == len(one) == len(BucketBatchSampler(LENGTHS, 4, True, 5, num_replicas, 0))
        for r in ranks
    )
    for k, global_batch in enumerate(one):
        parts = [r[k] for r in ranks]
        assert all(parts) and sorted(i for p in parts for i in p) == sorted(global_batch)


def test_a_last_batch_shorter_than_the_processes_repeats_its_examples():
    """5 examples, 2 per process, 4 processes: the last global batch holds one example, which every
    rank gets."""
    lengths = [3, 1, 4, 1, 5]
    ranks = [
        list(BucketBatchSampler(lengths, 1, False, 0, num_replicas=4, rank=r)) for r in range(4)
    ]
    assert [len(r) for r in ranks] == [2, 2, 2, 2]
    assert sorted(i for r in ranks for i in r[0]) == [0, 1, 2, 3]
    assert {tuple(r[1]) for r in ranks} == {(4,)}


@pytest.mark.parametrize("rank", [-1, 2])
def test_a_rank_outside_the_processes_is_refused(rank):
    """A rank not in [0, num_replicas) names both numbers and the range expected."""
    with pytest.raises(
        ValueError, match=rf"rank {rank} of 2 processes: expected 0 <= rank < num_replicas"
    ):
        BucketBatchSampler(LENGTHS, 8, True, 0, num_replicas=2, rank=rank)


def loader(seed: int = 7) -> ResumableLoader:
    return ResumableLoader(
        list(range(len(LENGTHS))),
        batch_sampler=BucketBatchSampler(LENGTHS, 8, True, seed),
        collate_fn=list,
    )


def test_a_loader_resumed_inside_an_epoch_goes_on_with_its_next_batch():
    """state_dict after 5 batches of epoch 2, loaded into a fresh loader: the epoch's remaining 8
    batches, in the uninterrupted order; the next iteration starts the epoch afresh."""
    straight = loader()
    straight.batch_sampler.set_epoch(2)
    whole = list(straight)
    interrupted = loader()
    interrupted.batch_sampler.set_epoch(2)
    it = iter(interrupted)
    taken = [next(it) for _ in range(5)]
    state = interrupted.state_dict()
    assert state == {"epoch": 2, "taken": 5} and taken == whole[:5]
    resumed = loader()
    resumed.load_state_dict(state)
    assert list(resumed) == whole[5:]
    assert resumed.state_dict() == {"epoch": 2, "taken": 13}
    assert list(resumed) == whole  # the skip applies once


def test_a_checkpoint_at_the_end_of_an_epoch_resumes_at_the_first_batch():
    """taken == len(sampler) (a save after the epoch's last batch): nothing is skipped."""
    resumed = loader()
    resumed.load_state_dict({"epoch": 1, "taken": len(resumed.batch_sampler)})
    straight = loader()
    straight.batch_sampler.set_epoch(1)
    assert list(resumed) == list(straight)


def test_loaders_draw_from_their_own_generator():
    """Each ResumableLoader has its own generator (iterating does not consume the global RNG's state
    for seeds)."""
    import torch

    a, b = loader(), loader()
    assert a.generator is not None and a.generator is not b.generator
    torch.manual_seed(0)
    list(a)
    after = torch.rand(1)
    torch.manual_seed(0)
    assert torch.equal(torch.rand(1), after)


def test_data_parallel_reads_the_trainers_strategy():
    """(2, 0) for a two-process ddp trainer (built, not launched); (1, 0) for one process or no
    trainer."""
    import lightning.pytorch as pl

    quiet = {
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
    }
    assert data_parallel(pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", **quiet)) == (
        2,
        0,
    )
    assert data_parallel(pl.Trainer(accelerator="cpu", devices=1, **quiet)) == (1, 0)
    assert data_parallel(None) == (1, 0)
