#!/usr/bin/env python3
"""Reference training speed for `stepwise bench train`: the M3C model with the HTRN scorer in PyTorch on CPU.

The architecture of crates/stepwise-models/src/m3c (flat context: one vector per step), with no padding:
- context encoder: bidirectional LSTM (d_c → H per direction) over the N steps of a question → N × 2H;
- query encoder: bidirectional LSTM (d_q → H) over the NQ vectors of each candidate → NQ × 2H;
- HTRN: the context states repeated for the question's A candidates, then per candidate
  [CLS, proj_c(C_1..C_N), SEP, proj_q(Q_1..Q_NQ)] + position embedding (128 × D) + segment embedding
  (0 for CLS, context, SEP; 1 for the query) → LayerNorm(eps 1e-12) → L post-LN nn.TransformerEncoderLayer
  (FFN 4D, dropout 0, gelu, eps 1e-12) → the CLS output → Linear(D → 1, no bias, as in Rust: a bias adds the
  same constant to every candidate) = the candidate's score; cross-entropy over the A scores of a question.
- Adam(lr 5e-4, betas 0.9/0.999, eps 1e-8, no weight decay).

As in Rust, the context states are repeated before proj_c (A× the work of projecting once per question).
A training step = zero_grad + forward + loss + backward + optimiser step on one batch of random questions
(float32 normal vectors from a seeded numpy generator, made before any timing).

Prints the parameter count by module (keys named like the Rust parameters) and the timings; with --json one
JSON object on stdout (the table then goes to stderr). Exit code 3 when torch or numpy is missing.
Install: see scripts/bench/README.md (requirements-torch.txt).
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch_bench as tb  # noqa: E402


def build_model(torch, a):
    nn = torch.nn
    H, D = a.hidden, a.model_dim

    class Htrn(nn.Module):
        def __init__(self):
            super().__init__()
            self.context_lstm = nn.LSTM(a.dim_context, H, num_layers=1, batch_first=True, bidirectional=True)
            self.query_lstm = nn.LSTM(a.dim_query, H, num_layers=1, batch_first=True, bidirectional=True)
            self.proj_context = nn.Linear(2 * H, D)
            self.proj_query = nn.Linear(2 * H, D)
            self.cls = nn.Parameter(torch.randn(D) * 0.02)
            self.sep = nn.Parameter(torch.randn(D) * 0.02)
            self.positions = nn.Parameter(torch.randn(a.max_positions, D) * 0.02)
            self.segments = nn.Parameter(torch.randn(2, D) * 0.02)
            self.norm = nn.LayerNorm(D, eps=1e-12)
            self.layers = nn.ModuleList(
                nn.TransformerEncoderLayer(d_model=D, nhead=a.heads, dim_feedforward=4 * D, dropout=0.0,
                                           activation="gelu", batch_first=True, norm_first=False,
                                           layer_norm_eps=1e-12)
                for _ in range(a.layers))
            self.out = nn.Linear(D, 1, bias=False)
            n, l = a.context_steps, a.query_len
            seg = torch.zeros(n + l + 2, dtype=torch.long)
            seg[n + 2:] = 1
            self.register_buffer("segment_ids", seg, persistent=False)

        def groups(self):
            """(Rust name prefix, module or parameter) in a readable order."""
            g = [("encoder.context", self.context_lstm), ("encoder.query", self.query_lstm),
                 ("scorer.proj_context", self.proj_context), ("scorer.proj_query", self.proj_query),
                 ("scorer.cls", self.cls), ("scorer.sep", self.sep), ("scorer.positions", self.positions),
                 ("scorer.segments", self.segments), ("scorer.norm", self.norm)]
            g += [(f"scorer.layer{i}", layer) for i, layer in enumerate(self.layers)]
            return g + [("scorer.out", self.out)]

        def scores(self, context, query):
            """context B × N × d_c, query (B·A) × NQ × d_q → scores B × A."""
            b = context.shape[0]
            s = query.shape[0]
            c, _ = self.context_lstm(context)  # B × N × 2H
            c = c.repeat_interleave(s // b, dim=0)  # (B·A) × N × 2H
            q, _ = self.query_lstm(query)  # (B·A) × NQ × 2H
            x = torch.cat([self.cls.expand(s, 1, D), self.proj_context(c), self.sep.expand(s, 1, D),
                           self.proj_query(q)], dim=1)
            t = x.shape[1]
            x = self.norm(x + self.positions[:t] + self.segments[self.segment_ids[:t]])
            for layer in self.layers:
                x = layer(x)
            return self.out(x[:, 0]).squeeze(-1).view(b, s // b)

        def loss(self, context, query, answers):
            return torch.nn.functional.cross_entropy(self.scores(context, query), answers)

    return Htrn()


def expected_parameters(a):
    """The total by formula (PyTorch layouts: LSTM with two biases; attention q, k, v, out with biases)."""
    H, D, ff = a.hidden, a.model_dim, 4 * a.model_dim

    def lstm(i):
        return 2 * (4 * H * i + 4 * H * H + 8 * H)

    layer = 4 * (D * D + D) + (D * ff + ff) + (ff * D + D) + 4 * D
    return (lstm(a.dim_context) + lstm(a.dim_query) + 2 * (2 * H * D + D) + 2 * D + a.max_positions * D
            + 2 * D + 2 * D + a.layers * layer + D)


def flops_per_step(a):
    """Matrix-multiply FLOPs of one training step (2 per multiply-add; backward counted as 2× forward)."""
    B, A, N, L = a.batch, a.candidates, a.context_steps, a.query_len
    H, D, ff = a.hidden, a.model_dim, 4 * a.model_dim
    S, T = B * A, N + L + 2
    fwd = 2 * 2 * B * N * 4 * H * (a.dim_context + H)  # context BiLSTM
    fwd += 2 * 2 * S * L * 4 * H * (a.dim_query + H)  # query BiLSTM
    fwd += 2 * S * (N + L) * 2 * H * D  # projections
    fwd += a.layers * (2 * S * T * 4 * D * D + 2 * 2 * S * T * T * D + 2 * 2 * S * T * D * ff)
    fwd += 2 * S * D
    return 3 * fwd


def make_batches(np, torch, rng, a, questions):
    """Random questions in batches of a.batch (the last one may be smaller)."""
    out = []
    for start in range(0, questions, a.batch):
        b = min(a.batch, questions - start)
        ctx = rng.standard_normal((b, a.context_steps, a.dim_context), dtype=np.float32)
        qry = rng.standard_normal((b * a.candidates, a.query_len, a.dim_query), dtype=np.float32)
        ans = rng.integers(0, a.candidates, size=b)
        out.append((torch.from_numpy(ctx), torch.from_numpy(qry), torch.from_numpy(ans).long()))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    tb.add_common_args(ap, batch=32, epoch_name="questions")
    ap.add_argument("--candidates", type=int, default=4, help="A")
    ap.add_argument("--context-steps", type=int, default=20, help="N")
    ap.add_argument("--query-len", type=int, default=4, help="NQ")
    ap.add_argument("--dim-context", type=int, default=384, help="d_c")
    ap.add_argument("--dim-query", type=int, default=1280, help="d_q")
    ap.add_argument("--hidden", type=int, default=256, help="LSTM hidden units per direction (H)")
    ap.add_argument("--model-dim", type=int, default=512, help="transformer width (D); FFN 4D")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--max-positions", type=int, default=128)
    a = ap.parse_args()
    if a.context_steps + a.query_len + 2 > a.max_positions:
        ap.error(f"context {a.context_steps} + query {a.query_len} + 2 exceeds --max-positions {a.max_positions}")

    torch, np = tb.import_torch()
    m = tb.measure(torch, np, a, build_model, expected_parameters, make_batches)
    threads, counts, total, losses = m["threads"], m["counts"], m["total"], m["losses"]
    step_seconds, median, minimum, epoch_seconds = m["step_seconds"], m["median"], m["minimum"], m["epoch_seconds"]
    rss_import = m["rss_import"]

    record = {
        "benchmark": "htrn_train_step",
        "versions": tb.versions(torch, np),
        "threads": threads,
        "config": {k: getattr(a, k) for k in ("batch", "candidates", "context_steps", "query_len", "dim_context",
                                               "dim_query", "hidden", "model_dim", "layers", "heads",
                                               "max_positions", "seed", "warmup", "steps")},
        "parameters": total,
        "parameters_by_module": counts,
        "step_seconds": step_seconds,
        "step_seconds_median": median,
        "step_seconds_min": minimum,
        "epoch_questions": a.epoch_items,
        "epoch_seconds": epoch_seconds,
        "questions_per_second": m["items_per_second"],
        "flops_per_step": flops_per_step(a),
        "gflops_per_second_median": flops_per_step(a) / median / 1e9 if median else None,
        "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None,
        "peak_rss_mib": tb.peak_rss_mib(),
        "rss_mib_after_import": rss_import,
    }
    tb.report(a, record, counts, total)


if __name__ == "__main__":
    main()
