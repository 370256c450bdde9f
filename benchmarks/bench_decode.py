"""`nmtpipe decode` speed: beam search against Hugging Face `generate(num_beams=4)`.

Both decode the same sentences with the same weights: the model is nmtpipe's (the
README demo's checkpoint by default, or a randomly initialised preset with --arch), and
the peer is a `MarianMTModel` built from a config with its sizes (post-norm, ReLU,
scaled embeddings, tied output) into which those weights are copied, positions
included, so the two compute the same function (the script prints the largest logit
difference). Sentences come from the encoded test split, sorted by length and cut into
the same batches for both (at most --max-tokens padded source tokens). Search: beam 4,
score / length (fairseq's `--lenpen 1`; HF `length_penalty=1.0, early_stopping=True`,
which both stop once 4 hypotheses finished), at most `a * source length + b` tokens
(`--max-len-a 1 --max-len-b 50`; HF applies it to a batch's longest source, nmtpipe to
each source, so for a random model, which babbles to the limit, give `--max-len-a 0`).
Reported: sentences/s and target tokens/s (best hypotheses, EOS counted), and how many
best hypotheses the two agree on. Then `nmtpipe decode` itself with 1 and 2 ranks.

    python benchmarks/bench_decode.py                       # after the README's command
    python benchmarks/bench_decode.py --arch transformer_base --sentences 100 \
        --max-len-a 0 --max-len-b 60
    # on a GPU (the anchor: CTranslate2's ~9.3k tokens/s, fp16, OPUS-MT base, A10G):
    python benchmarks/bench_decode.py --arch transformer_base --device cuda \
        --sentences 1997 --max-tokens 8192 --max-len-a 0 --max-len-b 60
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
from transformers import MarianConfig, MarianMTModel

from nmtpipe.trainers.data.batching import greedy_cuts, padded
from nmtpipe.trainers.loop import checkpoint
from nmtpipe.trainers.model.beam_search import BeamSearch
from nmtpipe.trainers.model.config import preset
from nmtpipe.trainers.model.search_config import SearchConfig
from nmtpipe.trainers.model.transformer import Transformer, timing_signal
from nmtpipe.transforms.formats.encoded_dataset import open_dataset

BEAM = 4


def load_model(args: argparse.Namespace, data) -> Transformer:
    if args.arch is None:
        return checkpoint.model_from(checkpoint.load(args.checkpoint))
    langs = data.languages
    torch.manual_seed(0)
    sizes = data.vocab_sizes
    config = preset(
        args.arch, src_vocab=sizes[langs["src"]], tgt_vocab=sizes[langs["tgt"]],
        pad=data.layout.pad, share_all_embeddings=data.joined,
    )  # fmt: skip
    return Transformer(config).eval()


def marian_twin(model: Transformer, eos: int) -> MarianMTModel:
    """A MarianMTModel computing what `model` computes (same weights and positions)."""
    c = model.config
    if not c.share_all_embeddings or c.pre_norm:
        raise SystemExit("the twin needs a post-norm model with one shared embedding table")
    hf = MarianMTModel(MarianConfig(
        vocab_size=c.tgt_vocab, decoder_vocab_size=c.tgt_vocab, d_model=c.d_model,
        encoder_layers=c.encoder_layers, decoder_layers=c.decoder_layers,
        encoder_attention_heads=c.heads, decoder_attention_heads=c.heads,
        encoder_ffn_dim=c.ffn, decoder_ffn_dim=c.ffn, activation_function="relu",
        dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, scale_embedding=True,
        max_position_embeddings=1024, pad_token_id=c.pad, eos_token_id=eos,
        decoder_start_token_id=eos, forced_eos_token_id=None, tie_word_embeddings=True,
        share_encoder_decoder_embeddings=True,
    )).eval()  # fmt: skip
    with torch.no_grad():
        hf.model.shared.weight.copy_(model.tgt_embed.weight)
        for stack in (hf.model.encoder, hf.model.decoder):
            table = stack.embed_positions.weight
            table.copy_(timing_signal(table.shape[0], c.d_model))
        for theirs, ours in zip(hf.model.encoder.layers, model.encoder, strict=True):
            _copy_attention(theirs.self_attn, ours.attention)
            _copy_block(theirs, ours, ["self_attn_layer_norm", "final_layer_norm"])
        for theirs, ours in zip(hf.model.decoder.layers, model.decoder, strict=True):
            _copy_attention(theirs.self_attn, ours.self_attention)
            _copy_attention(theirs.encoder_attn, ours.cross_attention)
            norms = ["self_attn_layer_norm", "encoder_attn_layer_norm", "final_layer_norm"]
            _copy_block(theirs, ours, norms)
    hf.tie_weights()
    return hf


def _copy_attention(theirs, ours) -> None:
    theirs.q_proj.load_state_dict(ours.q.state_dict())
    theirs.out_proj.load_state_dict(ours.out.state_dict())
    key_w, value_w = ours.kv.weight.chunk(2, dim=0)  # our kv projection: [keys; values]
    key_b, value_b = ours.kv.bias.chunk(2, dim=0)
    theirs.k_proj.load_state_dict({"weight": key_w, "bias": key_b})
    theirs.v_proj.load_state_dict({"weight": value_w, "bias": value_b})


def _copy_block(theirs, ours, norms: list[str]) -> None:
    """Layer norms (one per sub-layer, in order) and the feed-forward weights."""
    for name, sub in zip(norms, ours.sub, strict=True):
        getattr(theirs, name).load_state_dict(sub.norm.state_dict())
    theirs.fc1.load_state_dict(ours.ffn.inner.state_dict())
    theirs.fc2.load_state_dict(ours.ffn.outer.state_dict())


def batches(split, count: int, max_tokens: int, pad: int) -> list[torch.Tensor]:
    sources = [split[i][0].astype(np.int64) for i in range(min(count, len(split)))]
    lengths = np.array([s.size for s in sources])
    order = np.argsort(lengths, kind="stable")
    cuts = greedy_cuts(padded(lengths[order], 8), max_tokens)
    out = []
    for a, b in itertools.pairwise(cuts):
        rows = [sources[i] for i in order[a:b]]
        src = torch.full((len(rows), max(r.size for r in rows)), pad, dtype=torch.long)
        for j, r in enumerate(rows):
            src[j, : r.size] = torch.from_numpy(r)
        out.append(src)
    return out


def _autocast(args):
    """bf16 on CUDA for both, as `nmtpipe decode` runs there."""
    if args.device.startswith("cuda"):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _sync(args) -> None:
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()


def time_ours(args, model, layout, srcs) -> tuple[float, list[list[int]], int]:
    config = SearchConfig(beam=BEAM, lenpen=1.0, max_len_a=args.max_len_a, max_len_b=args.max_len_b)
    search = BeamSearch(model, layout, config)
    search(srcs[0][:2], _autocast(args))  # warm-up
    _sync(args)
    started = time.perf_counter()
    best = [hyps[0] for src in srcs for hyps in search(src, _autocast(args))]
    seconds = time.perf_counter() - started
    tokens = sum(len(h.tokens) + h.finished for h in best)
    return seconds, [h.tokens for h in best], tokens


def time_hf(args, hf, layout, srcs) -> tuple[float, list[list[int]], int]:
    def generate(src):
        longest = int((src != layout.pad).sum(1).max())  # HF's limit is per batch
        return hf.generate(
            input_ids=src, attention_mask=src != layout.pad, num_beams=BEAM, do_sample=False,
            max_new_tokens=int(args.max_len_a * longest + args.max_len_b), length_penalty=1.0,
            early_stopping=True, num_return_sequences=1, bad_words_ids=[[layout.pad]],
        )  # fmt: skip

    with torch.no_grad(), _autocast(args):
        generate(srcs[0][:2])
        _sync(args)
        started = time.perf_counter()
        outs = [generate(src) for src in srcs]
        _sync(args)
        seconds = time.perf_counter() - started
    best, tokens = [], 0
    for out in outs:
        for row in out[:, 1:].tolist():  # drop the start symbol; cut after EOS (HF pads)
            ended = layout.eos in row
            row = row[: row.index(layout.eos)] if ended else [t for t in row if t != layout.pad]
            tokens += len(row) + ended
            best.append(row)
    return seconds, best, tokens


def max_logit_difference(model, hf, src: torch.Tensor, eos: int) -> float:
    prev = torch.cat([torch.full((src.shape[0], 1), eos, device=src.device), src[:, :-1]], 1)
    with torch.no_grad():
        ours = model(src, prev)
        theirs = hf(
            input_ids=src, attention_mask=src != model.config.pad, decoder_input_ids=prev
        ).logits
    return float((ours - theirs).abs().max())


def ranks(args: argparse.Namespace, nproc: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="nmtpipe-bench-decode-") as out:
        cmd = [sys.executable, "-m", "nmtpipe", "decode", "--checkpoint", args.checkpoint,
               "--data", args.data, "--output", out, "--beam", str(BEAM), "--lenpen", "1.0",
               "--max-len-a", str(args.max_len_a), "--max-len-b", str(args.max_len_b),
               "--nproc", str(nproc)]  # fmt: skip
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - started
    summary = next(json.loads(x)["summary"] for x in proc.stdout.splitlines() if '"summary"' in x)
    keys = ("sentences", "seconds", "sentences_per_s", "target_tokens_per_s", "bleu", "chrf")
    return {"nproc": nproc, "wall_seconds": round(wall, 1), **{k: summary[k] for k in keys}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", default="runs/example/checkpoints/checkpoint_best.pt")
    parser.add_argument("--data", default="runs/example/encoded")
    parser.add_argument("--arch", help="a random model of this preset instead of --checkpoint")
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--device", default="cpu", help="cpu, or cuda (bf16 autocast)")
    parser.add_argument("--max-len-a", type=float, default=1.0)
    parser.add_argument("--max-len-b", type=int, default=50)
    parser.add_argument("--nproc", type=int, nargs="*", default=[1, 2])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    data = open_dataset(args.data)
    model = load_model(args, data)
    layout = data.layout
    hf = marian_twin(model, layout.eos).to(args.device)
    model.to(args.device)
    srcs = [
        s.to(args.device)
        for s in batches(data["test"], args.sentences, args.max_tokens, layout.pad)
    ]
    diff = max_logit_difference(model, hf, srcs[len(srcs) // 2][:8], layout.eos)
    ours_s, ours_best, ours_tokens = time_ours(args, model, layout, srcs)
    hf_s, hf_best, hf_tokens = time_hf(args, hf, layout, srcs)
    n = len(ours_best)
    same = float(np.mean([a == b for a, b in zip(ours_best, hf_best, strict=True)]))
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "torch": torch.__version__, "model": args.arch or args.checkpoint,
        "d_model": model.config.d_model, "layers": model.config.encoder_layers,
        "vocab": model.config.tgt_vocab, "sentences": n, "batches": len(srcs),
        "threads": args.threads, "device": args.device, "max_len": [args.max_len_a, args.max_len_b],
        "max_logit_difference": round(diff, 6),
        "nmtpipe": {"seconds": round(ours_s, 2), "sentences_per_s": round(n / ours_s, 1),
                    "target_tokens_per_s": round(ours_tokens / ours_s, 1)},
        "hf_generate": {"seconds": round(hf_s, 2), "sentences_per_s": round(n / hf_s, 1),
                        "target_tokens_per_s": round(hf_tokens / hf_s, 1)},
        "speedup_sentences": round(hf_s / ours_s, 2),
        "speedup_tokens": round((ours_tokens / ours_s) / (hf_tokens / hf_s), 2),
        "same_best_hypothesis": round(same, 3),
    }  # fmt: skip
    if args.arch is None:
        result["ranks"] = [ranks(args, k) for k in args.nproc]
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
