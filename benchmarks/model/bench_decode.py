"""`nmtpipe decode` speed: beam search against Hugging Face `generate(num_beams=4)` and
CTranslate2 (float32 and int8), on the same model and sentences.

All decode the same sentences with the same weights: the model is nmtpipe's (the README
demo's checkpoint by default, or a randomly initialised preset with --arch), the peers
are the `MarianMTModel` that `nmtpipe export` makes of it (trainers/export/marian_weights.py,
positions included, so the two compute the same function; the script prints the largest
logit difference) and the CTranslate2 models the export's converter makes of that.
Sentences come from the encoded test split, sorted by length and cut into the same
batches for all (at most --max-tokens padded source tokens). Search: beam 4, score /
length (fairseq's `--lenpen 1`; HF `length_penalty=1.0, early_stopping=True` and
CTranslate2 `length_penalty=1`, which all stop once 4 hypotheses finished), at most
`a * source length + b` tokens (`--max-len-a 1 --max-len-b 50`; HF and CTranslate2
apply it to a batch's longest source, nmtpipe to each source, so for a random model,
which babbles to the limit, give `--max-len-a 0`). Threads: --threads for all (the
cores by default). nmtpipe runs twice: as `nmtpipe decode` runs on the CPU (linear
layers packed for oneDNN, trainers/model/packed_linear.py) and unpacked. Each engine
runs in processes of its own, --rounds of them, the engines taking turns; each process
times --repeat passes after a warm-up, and the engine's time is its fastest pass.
Reported: sentences/s and target tokens/s (best hypotheses, EOS counted), the speed
relative to `generate`, and the share of best hypotheses equal to nmtpipe's. With a
checkpoint, then `nmtpipe decode` itself with 1 and 2 ranks.

    python benchmarks/model/bench_decode.py                       # after the README's command
    # random models, 32 sentences, exactly 30 target tokens each (the same work for all):
    python benchmarks/model/bench_decode.py --data runs/spm/encoded --arch transformer_base \
        --sentences 32 --min-len 30 --max-len-a 0 --max-len-b 30
    # on a GPU (the anchor: CTranslate2's ~9.3k tokens/s, fp16, OPUS-MT base, A10G):
    python benchmarks/model/bench_decode.py --arch transformer_base --device cuda \
        --sentences 1997 --max-tokens 8192 --max-len-a 0 --max-len-b 60
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import ctranslate2
import numpy as np
import torch
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from transformers import MarianMTModel, PreTrainedTokenizerFast

from nmtpipe.trainers.data.batching import length_sorted_batches
from nmtpipe.trainers.export import ctranslate2_convert
from nmtpipe.trainers.export.marian_weights import save_marian, to_marian
from nmtpipe.trainers.model.beam_search import BeamSearch
from nmtpipe.trainers.model.config import preset
from nmtpipe.trainers.model.packed_linear import pack_linears
from nmtpipe.trainers.model.search_config import SearchConfig
from nmtpipe.trainers.model.transformer import Transformer
from nmtpipe.trainers.runtime import checkpoint
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


def ctranslate2_twins(hf: MarianMTModel, layout, folder: str, kinds: list[str]) -> dict:
    """CTranslate2 models of `hf` (one per quantization), through the export's converter.
    Tokens are the ids written as text, so any vocabulary kind works."""
    hf_folder = os.path.join(folder, "hf")
    save_marian(hf, hf_folder)
    size = hf.config.vocab_size
    words = Tokenizer(WordLevel({str(i): i for i in range(size)}, unk_token=str(layout.unk)))
    special = {"bos_token": layout.bos, "eos_token": layout.eos, "unk_token": layout.unk,
               "pad_token": layout.pad}  # fmt: skip
    PreTrainedTokenizerFast(
        tokenizer_object=words, **{k: str(v) for k, v in special.items() if v is not None}
    ).save_pretrained(hf_folder)
    out = {}
    for kind in kinds:
        ctranslate2_convert.convert(hf_folder, os.path.join(folder, kind), kind)
        out[kind] = os.path.join(folder, kind)
    return out


def batches(split, count: int, max_tokens: int, pad: int) -> list[torch.Tensor]:
    sources = [split[i][0].astype(np.int64) for i in range(min(count, len(split)))]
    lengths = np.array([s.size for s in sources])
    out = []
    for batch in length_sorted_batches(lengths, max_tokens):
        rows = [sources[i] for i in batch]
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


def time_engine(args: argparse.Namespace) -> dict:
    """In a process of its own: --engine's fastest of --repeat passes over the batches,
    after one warm-up; its seconds, best hypotheses and target tokens."""
    data = open_dataset(args.data)
    layout = data.layout
    model = load_model(args, data).to(args.device)
    srcs = [s.to(args.device) for s in batches(data["test"], args.sentences, args.max_tokens,
                                               layout.pad)]  # fmt: skip
    packed = False
    if args.engine == "hf_generate":
        engine = hf_generate(args, to_marian(model, layout, 1024).to(args.device), layout, srcs)
    elif args.engine.startswith("ctranslate2_"):
        engine = ctranslate2_engine(args, args.ct2_path, layout, [s.cpu() for s in srcs])
    else:
        packed = args.engine == "nmtpipe" and pack_linears(model)  # as `nmtpipe decode` runs
        engine = ours(args, model, layout, srcs)
    run, warm, read = engine
    warm()
    passes = []
    for _ in range(args.repeat):
        _sync(args)
        started = time.perf_counter()
        out = run()
        _sync(args)
        passes.append((time.perf_counter() - started, out))
    seconds, out = min(passes, key=lambda p: p[0])
    best, tokens = read(out)
    return {"seconds": seconds, "best": best, "tokens": tokens, "packed": packed}


def in_processes(args: argparse.Namespace, engines: dict[str, list[str]]) -> dict:
    """Each engine's fastest over --rounds processes, the engines taking turns process by
    process. A process of its own per engine: CTranslate2's OpenMP runtime beside
    PyTorch's, or a second CTranslate2 translator, slows the others in one process (up to
    2x, measured), and turns spread the machine's drift over all engines."""
    fastest: dict = {}
    for _ in range(args.rounds):
        for name, extra in engines.items():
            cmd = [sys.executable, __file__, *sys.argv[1:], "--engine", name, *extra]
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            result = json.loads(done.stdout.splitlines()[-1])
            if name not in fastest or result["seconds"] < fastest[name]["seconds"]:
                fastest[name] = result
    return fastest


def ours(args, model, layout, srcs) -> tuple:
    """nmtpipe's beam search over the batches: (run, warm-up, read), where `read` turns a
    run's result into the best hypotheses and their target tokens."""
    config = SearchConfig(beam=BEAM, lenpen=1.0, max_len_a=args.max_len_a,
                          max_len_b=args.max_len_b, min_len=args.min_len)  # fmt: skip
    search = BeamSearch(model, layout, config)

    def read(found) -> tuple[list[list[int]], int]:
        tokens = sum(len(h.tokens) + h.finished for h in found)
        return [h.tokens for h in found], tokens

    return (
        lambda: [h[0] for s in srcs for h in search(s, _autocast(args))],
        lambda: search(srcs[0][:2], _autocast(args)),
        read,
    )


def hf_generate(args, hf, layout, srcs) -> tuple:
    """Hugging Face `generate` over the same batches: (run, warm-up, read)."""

    def generate(src):
        longest = int((src != layout.pad).sum(1).max())  # HF's limit is per batch
        with torch.no_grad(), _autocast(args):
            return hf.generate(
                input_ids=src, attention_mask=src != layout.pad, num_beams=BEAM,
                do_sample=False, max_new_tokens=int(args.max_len_a * longest + args.max_len_b) + 1,
                length_penalty=1.0, early_stopping=True, num_return_sequences=1,
                bad_words_ids=[[layout.pad]], min_new_tokens=args.min_len,
            )  # fmt: skip

    def read(outs) -> tuple[list[list[int]], int]:
        best, tokens = [], 0
        for out in outs:
            for row in out[:, 1:].tolist():  # drop the start symbol; cut after EOS (HF pads)
                ended = layout.eos in row
                row = row[: row.index(layout.eos)] if ended else [t for t in row if t != layout.pad]
                tokens += len(row) + ended
                best.append(row)
        return best, tokens

    return lambda: [generate(src) for src in srcs], lambda: generate(srcs[0][:2]), read


def ctranslate2_engine(args, path: str, layout, srcs) -> tuple:
    """CTranslate2 on the CPU, the same batches, search and length limit as `generate`:
    (run, warm-up, read)."""
    translator = ctranslate2.Translator(path, device="cpu", inter_threads=1,
                                        intra_threads=args.threads)  # fmt: skip
    batches_ = [[[str(t) for t in row if t != layout.pad] for row in src.tolist()] for src in srcs]

    def translate(tokens):
        longest = max(len(t) for t in tokens)
        return translator.translate_batch(
            tokens, beam_size=BEAM, length_penalty=1.0, min_decoding_length=args.min_len,
            max_decoding_length=int(args.max_len_a * longest + args.max_len_b) + 1,
        )  # fmt: skip

    def read(results) -> tuple[list[list[int]], int]:
        best = [[int(t) for t in r.hypotheses[0]] for rs in results for r in rs]
        limit = [int(args.max_len_a * max(len(t) for t in b) + args.max_len_b) for b in batches_]
        sizes = [len(b) for b in batches_]
        ends = [lim for lim, n in zip(limit, sizes, strict=True) for _ in range(n)]
        tokens = sum(len(b) + (len(b) < lim) for b, lim in zip(best, ends, strict=True))
        return best, tokens

    return (
        lambda: [translate(tokens) for tokens in batches_],
        lambda: translate(batches_[0][:2]),
        read,
    )


def _speed(seconds: float, n: int, tokens: int) -> dict:
    return {"seconds": round(seconds, 2), "sentences_per_s": round(n / seconds, 1),
            "target_tokens_per_s": round(tokens / seconds, 1)}  # fmt: skip


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
    summary = next(
        json.loads(x)["result"] for x in proc.stdout.splitlines() if '"command": "decode"' in x
    )
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
    parser.add_argument("--min-len", type=int, default=0,
                        help="tokens before EOS, at least (= --max-len-b: equal work)")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=3,
                        help="passes per engine process; the fastest counts")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3,
                        help="processes per engine, the engines taking turns")  # fmt: skip
    parser.add_argument("--nproc", type=int, nargs="*", default=[1, 2])
    parser.add_argument("--ctranslate2", nargs="*", default=["float32", "int8"],
                        help="CTranslate2 quantizations to time (CPU)")  # fmt: skip
    parser.add_argument("--engine", help=argparse.SUPPRESS)  # one engine's process
    parser.add_argument("--ct2-path", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.engine:
        print(json.dumps(time_engine(args)))
        return
    data = open_dataset(args.data)
    model = load_model(args, data)
    layout = data.layout
    hf = to_marian(model, layout, 1024).to(args.device)
    model.to(args.device)
    srcs = [
        s.to(args.device)
        for s in batches(data["test"], args.sentences, args.max_tokens, layout.pad)
    ]
    diff = max_logit_difference(model, hf, srcs[len(srcs) // 2][:8], layout.eos)
    engines: dict[str, list[str]] = {"nmtpipe": [], "nmtpipe_unpacked": [], "hf_generate": []}
    with tempfile.TemporaryDirectory(prefix="nmtpipe-bench-ct2-") as folder:
        if args.device == "cpu" and args.ctranslate2:
            for kind, path in ctranslate2_twins(hf, layout, folder, args.ctranslate2).items():
                engines[f"ctranslate2_{kind}"] = ["--ct2-path", path]
        results = in_processes(args, engines)
    hf_s = results["hf_generate"]["seconds"]
    ours_best = results["nmtpipe"]["best"]
    n = len(ours_best)

    def versus(seconds: float, best: list[list[int]], tokens: int) -> dict:
        return {**_speed(seconds, n, tokens), "x_hf_generate": round(hf_s / seconds, 2),
                "same_best_as_nmtpipe": round(float(np.mean(
                    [a == b for a, b in zip(ours_best, best, strict=True)])), 3)}  # fmt: skip

    engines_out = {
        name: versus(r["seconds"], r["best"], r["tokens"]) for name, r in results.items()
    }
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "torch": torch.__version__, "ctranslate2": ctranslate2.__version__,
        "model": args.arch or args.checkpoint,
        "d_model": model.config.d_model, "layers": model.config.encoder_layers,
        "vocab": model.config.tgt_vocab, "sentences": n, "batches": len(srcs),
        "threads": args.threads, "device": args.device, "max_len": [args.max_len_a, args.max_len_b],
        "max_logit_difference": round(diff, 6),
        "packed_linears": results["nmtpipe"]["packed"], **engines_out,
    }  # fmt: skip
    if args.arch is None:
        result["ranks"] = [ranks(args, k) for k in args.nproc]
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
