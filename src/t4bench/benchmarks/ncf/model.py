"""NCF: NeuMF (GMF + MLP) on implicit MovieLens feedback, HR@10 with sampled negatives.

MLPerf Training v0.5 recommendation. Training: every positive plus `train_negatives` random
unseen items per positive, resampled each epoch. Evaluation: each user's held-out latest item
ranked among `eval_negatives` fixed unseen items.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch
from torch import nn

from t4bench import baselines
from t4bench.benchmark import Benchmark
from t4bench.benchmarks.ncf import movielens
from t4bench.benchmarks.ncf.config import NCFConfig
from t4bench.pytorch.context import RunContext, chunked
from t4bench.spec import RunSpec
from t4bench.spec.section import build

# the evaluation negatives are part of the dataset, not of the run: the same for every seed
EVAL_NEGATIVES_SEED = 20190501
TOP_K = 10


class NeuMF(nn.Module):
    def __init__(
        self, num_users: int, num_items: int, gmf_factors: int, mlp_layers: list[int], init_std: float = 0.01
    ) -> None:
        super().__init__()
        half = mlp_layers[0] // 2
        self.gmf_user = nn.Embedding(num_users, gmf_factors)
        self.gmf_item = nn.Embedding(num_items, gmf_factors)
        self.mlp_user = nn.Embedding(num_users, half)
        self.mlp_item = nn.Embedding(num_items, half)
        layers: list[nn.Module] = []
        for width_in, width_out in itertools.pairwise(mlp_layers):
            layers += [nn.Linear(width_in, width_out), nn.ReLU()]
        self.mlp = nn.Sequential(*layers)
        self.head = nn.Linear(gmf_factors + mlp_layers[-1], 1)
        for embedding in (self.gmf_user, self.gmf_item, self.mlp_user, self.mlp_item):
            # init_std: the embeddings' starting scale, a knob on how far apart seeds start
            nn.init.normal_(embedding.weight, std=init_std)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        gmf = self.gmf_user(users) * self.gmf_item(items)
        mlp = self.mlp(torch.cat([self.mlp_user(users), self.mlp_item(items)], dim=-1))
        return self.head(torch.cat([gmf, mlp], dim=-1)).squeeze(-1)


class NCFBenchmark(Benchmark[RunContext]):
    name = "ncf"
    throughput_unit = "samples/s"
    #: ml-20m: 20,000,263 ratings of 138,493 users, one held out each -> 19,861,770 positives,
    #: each with the reference's 4 negatives
    reference_train_samples = 19_861_770 * 5

    @classmethod
    def check_inputs(cls, cfg: RunSpec) -> None:
        movielens.check(str(cfg.model.data.dataset), Path(str(cfg.model.data.path)))

    def __init__(self, cfg: RunSpec, ctx: RunContext) -> None:
        super().__init__(cfg, ctx)
        # the typed `model:` section (its bounds were checked by the preflight)
        self.spec = build(NCFConfig, cfg.model.plain(), "model.")
        data_cfg = self.spec.data
        self.train_negatives = data_cfg.train_negatives
        if self.synthetic:
            self.num_users = data_cfg.synthetic_users
            self.num_items = data_cfg.synthetic_items
            self.data = None
            return
        self.data = movielens.load(data_cfg.dataset, Path(data_cfg.path))
        self.num_users, self.num_items = self.data.num_users, self.data.num_items
        rng = np.random.default_rng(EVAL_NEGATIVES_SEED)
        users = np.arange(self.num_users)
        negatives = self.data.sample_negatives(users, data_cfg.eval_negatives, rng)
        # column 0 is the held-out positive, the rest its negatives
        self.eval_items = torch.from_numpy(np.column_stack([self.data.test_items, negatives]))

    def dataset_train_size(self) -> int:
        assert self.data is not None
        return len(self.data.train_users) * (1 + self.train_negatives)

    def dataset_eval_size(self) -> int:
        assert self.data is not None
        return len(self.data.test_items)  # one held-out positive (and its negatives) per user

    def build_model(self) -> nn.Module:
        arch = self.spec.arch
        return NeuMF(
            self.num_users,
            self.num_items,
            arch.gmf_factors,
            list(arch.mlp_layers),
            init_std=arch.init_std,
        )

    def _epoch_samples(self, epoch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Positives + fresh negatives; identical on every rank (seeded by seed and epoch) so the
        shared permutation in `tensor_batches` shards it without overlap."""
        assert self.data is not None
        rng = np.random.default_rng([self.ctx.sampling_seed, epoch])
        pos_users, pos_items = self.data.train_users, self.data.train_items
        neg_items = self.data.sample_negatives(pos_users, self.train_negatives, rng).reshape(-1)
        users = np.concatenate([pos_users, np.repeat(pos_users, self.train_negatives)])
        items = np.concatenate([pos_items, neg_items])
        labels = np.concatenate([np.ones(len(pos_users)), np.zeros(len(neg_items))])
        return (
            torch.from_numpy(users),
            torch.from_numpy(items),
            torch.from_numpy(labels.astype(np.float32)),
        )

    def train_batches(self, epoch: int) -> list[tuple[torch.Tensor, ...]]:
        return self.ctx.tensor_batches(self._epoch_samples(epoch), self.spec.batch_size, epoch=epoch)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, int]:
        users, items, labels = batch
        logits = model(users, items)
        return nn.functional.binary_cross_entropy_with_logits(logits.float(), labels), len(labels)

    def evaluate(self, model: nn.Module) -> Mapping[str, float]:
        """HR@10 and NDCG@10: rank of each held-out item among its negatives."""
        candidates = self.eval_items.shape[1]
        users = torch.arange(self.num_users).repeat_interleave(candidates)
        items = self.eval_items.reshape(-1)
        step = self.spec.eval_batch_size
        device = self.ctx.device
        scores = [
            model(u.to(device), i.to(device)).float().cpu()
            for u, i in zip(chunked(users, step), chunked(items, step), strict=True)
        ]
        table = torch.cat(scores).reshape(self.num_users, candidates)
        # rank = negatives scored strictly above the positive (0 = top)
        rank = (table[:, 1:] > table[:, :1]).sum(dim=1)
        hits = rank < TOP_K
        ndcg = torch.where(hits, 1.0 / torch.log2(rank.double() + 2.0), torch.zeros(()))
        return {"hr_at_10": float(hits.double().mean()), "ndcg_at_10": float(ndcg.mean())}

    def synthetic_batch(self) -> tuple[torch.Tensor, ...]:
        gen = self.ctx.generator()
        size = self.spec.batch_size
        return (
            torch.randint(0, self.num_users, (size,), generator=gen),
            torch.randint(0, self.num_items, (size,), generator=gen),
            torch.randint(0, 2, (size,), generator=gen).float(),
        )

    trivial_baseline = "popularity ranking"

    def data_notes(self) -> Mapping[str, tuple[int, str]]:
        if self.data is None or not self.data.single_rating_users:
            return {}
        count = self.data.single_rating_users
        return {
            "single_rating_users": (
                count,
                f"{count} of {self.num_users} users have a single rating: it is their held-out test item, "
                "so they add nothing to training",
            )
        }

    def trivial_quality(self) -> Mapping[str, float]:
        if self.data is None:
            return {}
        return baselines.popularity_hit_rate(self.data.train_items, self.num_items, self.eval_items.cpu().numpy())
