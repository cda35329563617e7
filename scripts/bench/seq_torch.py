#!/usr/bin/env python3
"""Reference training speed of a multimodal sequencing model (BERSON-style) in PyTorch on CPU.

A sequence is n shuffled steps; each step has S text-token vectors (d_t) and P image-patch vectors (d_p). The gold
order is a random permutation. No padding (every step has S tokens and P patches).

Encoder (one transformer over the concatenated steps):
- per step: [CLS] (one learned D-vector shared by all steps, plus the mean of the step's projected rows),
  text_proj(t_1..t_S) (Linear d_t → D),
  image_proj(p_1..p_P) (Linear d_p → D); the n steps concatenated in input order: T = n·(1 + S + P) tokens;
- + position embedding (max 512 × D), + step-index embedding (max 16 × D; the step's index in the input),
  + modality embedding (3 × D: 0 CLS, 1 text, 2 image); LayerNorm(eps 1e-12);
- L post-LN nn.TransformerEncoderLayer (FFN 4D, dropout 0, gelu, eps 1e-12), full attention over all T tokens;
- step representation h_i = the output at step i's CLS.
Positions: with --positions step (default) the index within the step (0 .. S+P), since the default total
5 · 110 = 550 exceeds 512; with --positions global the index in the concatenation (0 .. T-1, must be < 512).

Decoder and losses:
- pairwise relative order: MLP([h_i, h_j, h_i*h_j, h_i-h_j] → Linear(4D → D) → ReLU → Linear(D → 1)) for every
  ordered pair i ≠ j; BCE-with-logits against "i comes before j", mean over the B·n·(n-1) pairs;
- pointer network: e = one more post-LN transformer layer (same type) over h_1..h_n; an LSTM decoder (input D,
  hidden D, one layer, one direction) with teacher forcing: inputs [start, e_{o_1}, ..., e_{o_{n-1}}] (start a
  learned D-vector, o the gold order), initial state h_0 = mean_j e_j, c_0 = 0; at output position t the score
  of step j is v^T tanh(W1 e_j + W2 d_t) (W1, W2: D × D, v: D, no biases), steps already placed are masked,
  cross-entropy against o_t, mean over the B·n positions (the last position has one candidate: loss 0);
- loss = pointer CE + pairwise BCE. Adam(lr 5e-4, betas 0.9/0.999, eps 1e-8, no weight decay).

A training step = zero_grad + forward + loss + backward + optimiser step on one batch of random sequences
(float32 normal vectors from a seeded numpy generator, made before any timing). Prints the parameter count by
module and the timings; with --json one JSON object on stdout (the table then goes to stderr). Exit code 3 when
torch or numpy is missing. Install: see scripts/bench/README.md (requirements-torch.txt).
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch_bench as tb  # noqa: E402


def build_model(torch, a):
    nn = torch.nn
    F = torch.nn.functional
    D, n, S, P = a.model_dim, a.seq_steps, a.text_tokens, a.patches
    per_step = 1 + S + P

    def layer():
        return nn.TransformerEncoderLayer(d_model=D, nhead=a.heads, dim_feedforward=4 * D, dropout=0.0,
                                          activation="gelu", batch_first=True, norm_first=False,
                                          layer_norm_eps=1e-12)

    class Sequencer(nn.Module):
        def __init__(self):
            super().__init__()
            self.text_tower = nn.ModuleList(
                nn.TransformerEncoderLayer(d_model=a.dim_text, nhead=12, dim_feedforward=4 * a.dim_text, dropout=0.0,
                                           activation="gelu", batch_first=True, norm_first=False,
                                           layer_norm_eps=1e-12)
                for _ in range(a.text_tower))
            self.text_proj = nn.Linear(a.dim_text, D)
            self.image_proj = nn.Linear(a.dim_image, D)
            self.cls = nn.Parameter(torch.randn(D) * 0.02)
            self.positions = nn.Parameter(torch.randn(a.max_positions, D) * 0.02)
            self.steps = nn.Parameter(torch.randn(a.max_steps, D) * 0.02)
            self.types = nn.Parameter(torch.randn(3, D) * 0.02)
            self.norm = nn.LayerNorm(D, eps=1e-12)
            self.layers = nn.ModuleList(layer() for _ in range(a.layers))
            self.pair_hidden = nn.Linear(4 * D, D)
            self.pair_out = nn.Linear(D, 1)
            self.ptr_encoder = layer()
            self.ptr_decoder = nn.LSTM(D, D, num_layers=1, batch_first=True)
            self.ptr_start = nn.Parameter(torch.randn(D) * 0.02)
            self.ptr_w1 = nn.Linear(D, D, bias=False)
            self.ptr_w2 = nn.Linear(D, D, bias=False)
            self.ptr_v = nn.Linear(D, 1, bias=False)
            # Pretraining (--pretrain-steps): the [MASK] vector and the MLM, ISP and PISP heads (as stepwise's).
            self.mask = nn.Parameter(torch.randn(D) * 0.02)
            self.mlm = nn.Linear(D, a.vocab)
            self.isp = nn.Linear(D, 1)
            self.pisp = nn.Linear(D, 1)
            within = torch.arange(per_step)
            pos = torch.arange(n * per_step) if a.positions == "global" else within.repeat(n)
            types = torch.cat([torch.zeros(1), torch.ones(S), torch.full((P,), 2)]).long().repeat(n)
            self.register_buffer("pos_ids", pos, persistent=False)
            self.register_buffer("step_ids", torch.arange(n).repeat_interleave(per_step), persistent=False)
            self.register_buffer("type_ids", types, persistent=False)
            off = ~torch.eye(n, dtype=torch.bool)
            self.register_buffer("pair_i", off.nonzero()[:, 0], persistent=False)
            self.register_buffer("pair_j", off.nonzero()[:, 1], persistent=False)

        def groups(self):
            g = [("encoder.text_proj", self.text_proj), ("encoder.image_proj", self.image_proj),
                 ("encoder.cls", self.cls), ("encoder.positions", self.positions), ("encoder.steps", self.steps),
                 ("encoder.types", self.types), ("encoder.norm", self.norm)]
            g += [(f"encoder.layer{i}", m) for i, m in enumerate(self.layers)]
            g += [(f"text_tower.layer{i}", m) for i, m in enumerate(self.text_tower)]
            return g + [("pairwise.hidden", self.pair_hidden), ("pairwise.out", self.pair_out),
                        ("pointer.encoder", self.ptr_encoder), ("pointer.decoder", self.ptr_decoder),
                        ("pointer.start", self.ptr_start), ("pointer.w1", self.ptr_w1), ("pointer.w2", self.ptr_w2),
                        ("pointer.v", self.ptr_v), ("encoder.mask", self.mask), ("pretrain.mlm", self.mlm),
                        ("pretrain.isp", self.isp), ("pretrain.pisp", self.pisp)]

        def encode(self, text, image, text_masked=None, rows_out=False):
            """text B × n × S × d_t, image B × n × P × d_p → step representations B × n × D (and every row's
            output with rows_out). text_masked (B × n × S, 1 = masked) replaces those text rows by the [MASK]
            vector (pretraining's MLM)."""
            b = text.shape[0]
            if len(self.text_tower) and text_masked is None:  # fine-tuning only (pretraining has no tower)
                t = text.reshape(b * n, S, a.dim_text)
                for m in self.text_tower:
                    t = m(t)
                text = t.view(b, n, S, a.dim_text)
            tp = self.text_proj(text)
            if text_masked is not None:
                m = text_masked.unsqueeze(-1)
                tp = tp * (1 - m) + self.mask * m
            rows = torch.cat([tp, self.image_proj(image)], dim=2)
            # A step's [CLS] input also carries the mean of its rows (as stepwise's encoder).
            x = torch.cat([self.cls.expand(b, n, 1, D) + rows.mean(dim=2, keepdim=True), rows], dim=2)
            x = x.reshape(b, n * per_step, D)
            x = self.norm(x + self.positions[self.pos_ids] + self.steps[self.step_ids] + self.types[self.type_ids])
            for m in self.layers:
                x = m(x)
            x = x.view(b, n, per_step, D)
            return (x[:, :, 0], x) if rows_out else x[:, :, 0]

        def pretrain_loss(self, text, image, text_masked, mlm_rows, mlm_ids, objective, labels, smrm_rows, originals,
                          perms):
            """L_MLM + the objective's loss, as stepwise's `pretrain_loss`: MLM = CE of the ids at the masked text
            rows (flat indices into B·n·S); ISP / PISP = BCE of a head on the mean [CLS]; SMRM = each masked
            patch output (flat indices into B·n·P) classified among the projected originals, columns shuffled."""
            b = text.shape[0]
            h, rows = self.encode(text, image, text_masked, rows_out=True)
            S, P = a.text_tokens, a.patches
            text_out = rows[:, :, 1:1 + S].reshape(b * n * S, D)
            loss = F.cross_entropy(self.mlm(text_out[mlm_rows]), mlm_ids)
            if objective in ("isp", "pisp"):
                head = self.isp if objective == "isp" else self.pisp
                loss = loss + F.binary_cross_entropy_with_logits(head(h.mean(1)).squeeze(-1), labels)
            elif objective == "smrm":
                img_out = rows[:, :, 1 + S:].reshape(b * n * P, D)[smrm_rows]
                logits = img_out @ self.image_proj(originals).t()
                shuffled = torch.gather(logits, 1, perms)
                target = (perms == torch.arange(len(perms)).unsqueeze(1)).float().argmax(1)
                loss = loss + F.cross_entropy(shuffled, target)
            return loss

        def loss(self, text, image, order):
            """order B × n: order[t] = the input index of the step at gold position t."""
            b = text.shape[0]
            h = self.encode(text, image)
            rank = torch.argsort(order, dim=1)  # rank[i] = gold position of input step i
            # Pairwise relative order over all ordered pairs i ≠ j.
            hi, hj = h[:, self.pair_i], h[:, self.pair_j]  # B × n(n-1) × D
            logits = self.pair_out(F.relu(self.pair_hidden(torch.cat([hi, hj, hi * hj, hi - hj], dim=-1))))
            before = (rank[:, self.pair_i] < rank[:, self.pair_j]).float()
            pair_loss = F.binary_cross_entropy_with_logits(logits.squeeze(-1), before)
            # Pointer network with teacher forcing.
            e = self.ptr_encoder(h)  # B × n × D
            gold = torch.gather(e, 1, order.unsqueeze(-1).expand(b, n, D))
            inputs = torch.cat([self.ptr_start.expand(b, 1, D), gold[:, :-1]], dim=1)
            h0 = e.mean(1).unsqueeze(0).contiguous()
            d, _ = self.ptr_decoder(inputs, (h0, torch.zeros_like(h0)))  # B × n × D
            u = self.ptr_v(torch.tanh(self.ptr_w1(e).unsqueeze(1) + self.ptr_w2(d).unsqueeze(2))).squeeze(-1)
            placed = rank.unsqueeze(1) < torch.arange(n, device=rank.device).view(1, n, 1)  # B × t × j
            u = u.masked_fill(placed, float("-inf"))
            ptr_loss = F.cross_entropy(u.reshape(b * n, n), order.reshape(b * n))
            return ptr_loss + pair_loss

    return Sequencer()


def expected_parameters(a):
    D, ff = a.model_dim, 4 * a.model_dim
    layer = 4 * (D * D + D) + (D * ff + ff) + (ff * D + D) + 4 * D
    enc = (a.dim_text * D + D) + (a.dim_image * D + D) + D + (a.max_positions + a.max_steps + 3) * D + 2 * D
    enc += a.layers * layer
    pair = (4 * D * D + D) + (D + 1)
    ptr = layer + (4 * D * D + 4 * D * D + 8 * D) + D + 2 * D * D + D
    pre = D + (D * a.vocab + a.vocab) + 2 * (D + 1)
    d_t = a.dim_text
    tower = a.text_tower * (4 * (d_t * d_t + d_t) + 2 * (d_t * 4 * d_t) + 4 * d_t + d_t + 4 * d_t)
    return enc + pair + ptr + pre + tower


def flops_per_step(a):
    """Matrix-multiply FLOPs of one training step (2 per multiply-add; backward counted as 2× forward)."""
    B, n, S, P = a.batch, a.seq_steps, a.text_tokens, a.patches
    D, ff = a.model_dim, 4 * a.model_dim
    T = n * (1 + S + P)

    def layer(t):
        return 2 * B * t * 4 * D * D + 2 * 2 * B * t * t * D + 2 * 2 * B * t * D * ff

    d_t = a.dim_text
    fwd = 2 * B * n * (S * a.dim_text + P * a.dim_image) * D + a.layers * layer(T)
    # The text tower: per step, S rows of width d_t (attention within the step).
    fwd += a.text_tower * B * n * (2 * S * 4 * d_t * d_t + 2 * 2 * S * S * d_t + 2 * 2 * S * d_t * 4 * d_t)
    fwd += 2 * B * n * (n - 1) * (4 * D * D + D)  # pairwise MLP
    fwd += layer(n) + 2 * B * n * 4 * D * 2 * D  # pointer encoder layer, decoder LSTM
    fwd += 2 * 2 * B * n * D * D + 2 * B * n * n * D  # W1 e, W2 d, v
    return 3 * fwd


def make_batches(np, torch, rng, a, sequences):
    out = []
    for start in range(0, sequences, a.batch):
        b = min(a.batch, sequences - start)
        text = rng.standard_normal((b, a.seq_steps, a.text_tokens, a.dim_text), dtype=np.float32)
        image = rng.standard_normal((b, a.seq_steps, a.patches, a.dim_image), dtype=np.float32)
        order = np.stack([rng.permutation(a.seq_steps) for _ in range(b)])
        out.append((torch.from_numpy(text), torch.from_numpy(image), torch.from_numpy(order).long()))
    return out


def pretraining_batch(np, torch, rng, a, objective):
    """One pretraining batch made like stepwise's `pretrain_batch` (before timing): 15% of each step's text rows
    masked (MLM, random ids), and for SMRM 15% of each image's patches zeroed with their originals kept."""
    b, n, S, P = a.batch, a.seq_steps, a.text_tokens, a.patches
    text, image, _ = make_batches(np, torch, rng, a, b)[0]
    k_text = max(1, round(0.15 * S))
    masked = np.zeros((b, n, S), dtype=np.float32)
    rows, ids = [], []
    for i in range(b):
        for j in range(n):
            for r in rng.choice(S, k_text, replace=False):
                masked[i, j, r] = 1.0
                rows.append((i * n + j) * S + r)
                ids.append(rng.integers(a.vocab))
    labels = torch.from_numpy(rng.integers(0, 2, b).astype(np.float32))
    smrm_rows, originals, perms = None, None, None
    if objective == "smrm":
        k_img = max(1, round(0.15 * P))
        flat, orig = [], []
        for i in range(b):
            for j in range(n):
                for r in rng.choice(P, k_img, replace=False):
                    orig.append(image[i, j, r].clone())
                    image[i, j, r] = 0.0
                    flat.append((i * n + j) * P + r)
        smrm_rows = torch.tensor(flat)
        originals = torch.stack(orig)
        perms = torch.from_numpy(np.stack([rng.permutation(len(flat)) for _ in flat]))
    return (text, image, torch.from_numpy(masked), torch.tensor(rows), torch.tensor(ids), objective, labels,
            smrm_rows, originals, perms)


def time_pretraining(np, torch, rng, a, model, opt):
    """Seconds of each timed pretraining step (two untimed first), objectives in stepwise's bench order."""
    objectives = ["isp", "smrm", "isp", "pisp", "smrm", "isp"]
    seconds = []
    for i in range(2 + a.pretrain_steps):
        batch = pretraining_batch(np, torch, rng, a, objectives[i % len(objectives)])
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model.pretrain_loss(*batch)
        loss.backward()
        opt.step()
        if i >= 2:
            seconds.append(time.perf_counter() - t0)
    return seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    tb.add_common_args(ap, batch=16, epoch_name="sequences")
    ap.add_argument("--seq-steps", type=int, default=5, help="n: steps per sequence")
    ap.add_argument("--text-tokens", type=int, default=60, help="S: text-token vectors per step")
    ap.add_argument("--patches", type=int, default=49, help="P: image-patch vectors per step")
    ap.add_argument("--dim-text", type=int, default=384, help="d_t")
    ap.add_argument("--dim-image", type=int, default=320, help="d_p")
    ap.add_argument("--model-dim", type=int, default=256, help="transformer width (D); FFN 4D")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--max-positions", type=int, default=512)
    ap.add_argument("--max-steps", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=30522, help="MLM vocabulary (pretraining step)")
    ap.add_argument("--text-tower", type=int, default=0,
                    help="fine-tuned text-encoder layers (MiniLM's shape: d_t wide, 12 heads, FFN 4 d_t) run per "
                         "step over its text rows before text_proj; the pretraining model has none")
    ap.add_argument("--pretrain-steps", type=int, default=0,
                    help="also time this many pretraining steps (after 2 untimed), objectives ISP, SMRM, PISP in turn")
    ap.add_argument("--positions", choices=("step", "global"), default="step",
                    help="position index within the step (default) or in the whole concatenation")
    a = ap.parse_args()
    per_step = 1 + a.text_tokens + a.patches
    longest = per_step * a.seq_steps if a.positions == "global" else per_step
    if longest > a.max_positions:
        ap.error(f"{longest} positions exceed --max-positions {a.max_positions}")
    if a.seq_steps > a.max_steps or a.seq_steps < 2:
        ap.error(f"--seq-steps {a.seq_steps}: need 2 .. --max-steps {a.max_steps}")

    torch, np = tb.import_torch()

    def pretraining(model, opt, rng):
        return time_pretraining(np, torch, rng, a, model, opt) if a.pretrain_steps > 0 else []

    m = tb.measure(torch, np, a, build_model, expected_parameters, make_batches, after_steps=pretraining)
    threads, counts, total, losses = m["threads"], m["counts"], m["total"], m["losses"]
    step_seconds, median, minimum, epoch_seconds = m["step_seconds"], m["median"], m["minimum"], m["epoch_seconds"]
    rss_import = m["rss_import"]

    record = {
        "benchmark": "seq_train_step",
        "versions": tb.versions(torch, np),
        "threads": threads,
        "config": {k: getattr(a, k) for k in ("batch", "seq_steps", "text_tokens", "patches", "dim_text",
                                               "dim_image", "model_dim", "layers", "heads", "max_positions",
                                               "max_steps", "positions", "seed", "warmup", "steps", "text_tower")},
        "tokens_per_sequence": per_step * a.seq_steps,
        "parameters": total,
        "parameters_by_module": counts,
        "step_seconds": step_seconds,
        "step_seconds_median": median,
        "step_seconds_min": minimum,
        "epoch_sequences": a.epoch_items,
        "epoch_seconds": epoch_seconds,
        "sequences_per_second": m["items_per_second"],
        "pretrain_step_seconds": m["extra"],
        "pretrain_step_seconds_median": statistics.median(m["extra"]) if m["extra"] else None,
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
