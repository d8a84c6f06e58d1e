"""The device-resident translation batches (`perf.gpu_data`, t4bench.benchmarks.shared_seq2seq.gpu_data)
run on the CPU, so CI walks the code an H100/H200 GNMT or Transformer run takes: every batch of an
epoch equals the host loader's (same tensors, lengths, token count, order) for one rank and for
each of two ranks; and greedy decoding that reads "all done?" every few steps gives the same
sentences as a read each step."""

from __future__ import annotations

import pytest
import torch
from conftest import DATA_ROOT, compose_spec, run_context

from t4bench.benchmarks.gnmt.model import GNMTBenchmark
from t4bench.benchmarks.shared_seq2seq import parts
from t4bench.benchmarks.shared_seq2seq.gpu_data import ResidentEpoch
from t4bench.benchmarks.shared_seq2seq.parts import EOS, TranslationBatch


def _bench(gpu_data: bool, rank: int = 0, world_size: int = 1) -> GNMTBenchmark:
    cfg = compose_spec(["model=gnmt", f"perf.gpu_data={str(gpu_data).lower()}", f"paths.data_root={DATA_ROOT}"])
    return GNMTBenchmark(cfg, run_context(rank=rank, world_size=world_size, data_root=DATA_ROOT))


def _same(a: TranslationBatch, b: TranslationBatch) -> bool:
    tensors = ("src", "tgt_in", "tgt_out")
    return (
        a.src_len == b.src_len
        and a.tokens == b.tokens
        and all(
            getattr(a, n).shape == getattr(b, n).shape and torch.equal(getattr(a, n), getattr(b, n)) for n in tensors
        )
    )


@pytest.mark.parametrize("world_size", [1, 2])
def test_resident_batches_equal_the_host_loaders(world_size: int) -> None:
    for rank in range(world_size):
        host, device = _bench(False, rank, world_size), _bench(True, rank, world_size)
        assert host.resident is None and device.resident is not None
        for epoch in (1, 2):
            resident = device.train_batches(epoch)
            assert isinstance(resident, ResidentEpoch)
            loaded = list(host.train_batches(epoch))
            built = list(resident)
            assert len(resident) == len(loaded) == len(built) > 10
            # padding shows: batches of unequal lengths are among them
            assert any(min(b.src_len) < b.src.size(1) for b in built)
            mismatched = [i for i, (a, b) in enumerate(zip(loaded, built, strict=True)) if not _same(a, b)]
            assert not mismatched, (rank, epoch, mismatched[:5])
            assert all(b.src.is_contiguous() and b.tgt_out.is_contiguous() for b in built)


def test_two_ranks_resident_shards_cover_the_epoch_once() -> None:
    one = _bench(True)
    whole = sorted(len(b.src_len) for b in one.train_batches(1))
    shards = [_bench(True, r, 2).train_batches(1) for r in (0, 1)]
    halves = sorted(len(b.src_len) for shard in shards for b in shard)
    # DistributedSampler pads an odd batch count with the head of its permutation: one batch twice
    assert len(halves) == len(whole) + len(whole) % 2
    assert sum(len(shard) for shard in shards) == len(halves)


class _LengthModel:
    """A decoder that follows the translation-model protocol (`start`, `step`) and emits word 5
    until each sentence's own length (its source length), then EOS and after it word 7 (which
    greedy decoding must mask as PAD): sentences that end at known, different steps."""

    def __init__(self, vocab: int) -> None:
        self.vocab, self.calls = vocab, 0

    def start(self, src: torch.Tensor, src_len: tuple[int, ...]) -> dict[str, torch.Tensor]:
        return {"ends": torch.tensor(src_len), "step": torch.zeros((), dtype=torch.long)}

    def step(self, state: dict[str, torch.Tensor], prev: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        self.calls += 1
        step, ends = state["step"], state["ends"]
        word = torch.where(step < ends, 5, torch.where(step == ends, EOS, 7))
        logits = torch.nn.functional.one_hot(word, self.vocab).float()
        return logits, {"ends": ends, "step": step + 1}


def test_greedy_decode_reading_done_every_few_steps_gives_the_same_sentences(monkeypatch: pytest.MonkeyPatch) -> None:
    src_len = (3, 9, 5, 1, 12, 9, 4)
    src = torch.full((len(src_len), max(src_len)), 4)
    decoded, calls = {}, {}
    for every in (1, parts.DONE_CHECK_EVERY):
        monkeypatch.setattr(parts, "DONE_CHECK_EVERY", every)
        model = _LengthModel(10)
        decoded[every] = parts.greedy_decode(model, src, src_len, max_len=40)
        calls[every] = model.calls
    assert decoded[1] == [[5] * n for n in src_len]
    assert decoded[parts.DONE_CHECK_EVERY] == decoded[1]
    # a read each step stops right after the last EOS (step 13); every 8 steps, at the next read
    assert calls == {1: 13, parts.DONE_CHECK_EVERY: 16}
    # the cap still holds when some sentence never ends
    monkeypatch.setattr(parts, "DONE_CHECK_EVERY", 8)
    model = _LengthModel(10)
    assert parts.greedy_decode(model, src, src_len, max_len=10)[4] == [5] * 10 and model.calls == 10
