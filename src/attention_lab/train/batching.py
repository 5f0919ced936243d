"""Token-id rows and length-bucketed, seeded batches; no Lightning, so evaluation and export import
this cheaply."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, Sampler


class BucketBatchSampler(Sampler[list[int]]):
    """Batches of similar source length; order reshuffled each epoch from (seed, epoch), so resuming
    is exact.

    Data parallel (num_replicas processes): the batches are those of one process with the global
    batch batch_size × num_replicas, and process `rank` takes every num_replicas-th example of each,
    so the processes together see exactly what one process sees with the global batch, and each
    yields the same number of batches (a rank that ran out first would leave the others waiting in a
    collective). A last batch shorter than num_replicas repeats its examples so that no process gets
    an empty one.
    """

    def __init__(
        self,
        lengths: list[int],
        batch_size: int,
        shuffle: bool,
        seed: int,
        num_replicas: int = 1,
        rank: int = 0,
    ):
        if not 0 <= rank < num_replicas:
            raise ValueError(
                f"rank {rank} of {num_replicas} processes: expected 0 <= rank < num_replicas"
            )
        self.lengths, self.batch_size, self.shuffle, self.seed, self.epoch = (
            lengths,
            batch_size,
            shuffle,
            seed,
            0,
        )
        self.num_replicas, self.rank = num_replicas, rank
        self.taken = self.skip = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def global_batches(self) -> list[list[int]]:
        """Every process's batches together: batches of batch_size × num_replicas examples."""
        size = self.batch_size * self.num_replicas
        g = torch.Generator().manual_seed(self.seed * 1000 + self.epoch)
        n = len(self.lengths)
        order = torch.randperm(n, generator=g).tolist() if self.shuffle else list(range(n))
        chunk = size * 50  # sort within large chunks: batches of similar length, still shuffled
        batches = []
        for i in range(0, n, chunk):
            part = sorted(order[i : i + chunk], key=self.lengths.__getitem__)
            batches += [part[j : j + size] for j in range(0, len(part), size)]
        if self.shuffle:
            batches = [batches[k] for k in torch.randperm(len(batches), generator=g).tolist()]
        return batches

    def __iter__(self):
        start, self.skip = self.skip, 0
        self.taken = start
        for batch in self.global_batches()[start:]:
            if len(batch) < self.num_replicas:  # a short last batch: one example for every process
                batch = (batch * self.num_replicas)[: self.num_replicas]
            self.taken += 1
            yield batch[self.rank :: self.num_replicas]

    def __len__(self) -> int:
        size = self.batch_size * self.num_replicas
        return (len(self.lengths) + size - 1) // size


class ResumableLoader(DataLoader):
    """A DataLoader over a BucketBatchSampler that Lightning saves in a checkpoint (its
    `state_dict`: the epoch and the batches taken, read by Lightning's fit loop at a save inside an
    epoch) and restores on resume, so a run resumed from a checkpoint taken inside an epoch
    (pretraining validates every N updates) goes on with the epoch's next batch, in the epoch's
    order, as an uninterrupted run would (Lightning itself sets no batch sampler's epoch on a resume
    inside an epoch, and restarts a plain loader from its first batch).

    It has a generator of its own: each iterator a DataLoader makes draws a base seed from it (from
    the global RNG, which dropout draws from, without one), and a resumed run makes its iterators at
    other moments than an uninterrupted one."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, generator=torch.Generator(), **kwargs)

    def state_dict(self) -> dict:
        return {"epoch": self.batch_sampler.epoch, "taken": self.batch_sampler.taken}

    def load_state_dict(self, state: dict) -> None:
        sampler = self.batch_sampler
        sampler.set_epoch(state["epoch"])
        # a whole epoch: the next starts afresh
        sampler.skip = state["taken"] if state["taken"] < len(sampler) else 0


def data_parallel(trainer) -> tuple[int, int]:
    """(num_replicas, rank) of a Lightning trainer's data-parallel processes (its strategy's
    DistributedSampler arguments); (1, 0) for one process or no trainer."""
    kwargs = getattr(getattr(trainer, "strategy", None), "distributed_sampler_kwargs", None)
    if not kwargs or kwargs.get("num_replicas", 0) < 2:
        return 1, 0
    return int(kwargs["num_replicas"]), int(kwargs["rank"])
