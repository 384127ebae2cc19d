"""Write a random-weight GGUF (llama, or gemma3 with sliding-window layers) for engine benches and fit checks.

The weights are noise, so the text is nonsense, but the shapes, the bytes read per token
and so the decode speed are those of a real model of that size. The tokenizer is copied
from a vocab-only GGUF (llama.cpp ships several as models/ggml-vocab-*.gguf). Needs
numpy and the `gguf` package (PyPI `gguf`, or llama.cpp's gguf-py on PYTHONPATH).

    python scripts/make_random_gguf.py --vocab ggml-vocab-llama-spm.gguf --out rand.gguf \
        --embd 1024 --layers 12 --heads 16 --kv-heads 8 --ffn 4096

`--arch gemma3 --swa 512` writes Gemma 3's tensor set (QK norms, post-norms, tied output)
with `gemma3.attention.sliding_window`; llama.cpp then windows five layers in six, as it
does for a real Gemma 3.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def copy_tokenizer(writer, vocab_path: str) -> int:
    """Copy every tokenizer.* key of a vocab-only GGUF; returns the vocabulary size."""
    import gguf

    reader = gguf.GGUFReader(vocab_path)
    n_vocab = 0
    for name, f in reader.fields.items():
        if not name.startswith("tokenizer."):
            continue
        vtype = f.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = f.types[-1]
            values = f.contents()
            writer.add_key_value(name, values, vtype, sub_type=sub)
            if name == "tokenizer.ggml.tokens":
                n_vocab = len(values)
        else:
            writer.add_key_value(name, f.contents(), vtype)
    if not n_vocab:
        raise SystemExit(f"{vocab_path} has no tokenizer.ggml.tokens")
    return n_vocab


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", required=True, help="a GGUF holding the tokenizer (vocab-only is fine)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--embd", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--ffn", type=int, default=4096)
    ap.add_argument("--ctx", type=int, default=4096, help="context_length written to the metadata")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="random-llama")
    ap.add_argument("--qtype", choices=("f16", "q4_k"), default="f16",
                    help="q4_k: every matrix written directly as Q4_K blocks (4.5 bits a weight; random "
                         "quants, small fixed scales), so an 8B or 30B shape needs no F16 copy or quantize step")
    ap.add_argument("--head-dim", type=int, default=0, help="attention head size (default embd / heads)")
    ap.add_argument("--experts", type=int, default=0, help="MoE: experts per layer (0: a dense model)")
    ap.add_argument("--experts-used", type=int, default=0, help="MoE: experts each token uses")
    ap.add_argument("--arch", choices=("llama", "gemma3"), default="llama")
    ap.add_argument("--swa", type=int, default=0, help="gemma3: the sliding window in tokens (required there)")
    args = ap.parse_args(argv)
    gemma = args.arch == "gemma3"
    if gemma and (args.swa <= 0 or args.experts):
        ap.error("--arch gemma3 needs --swa N and has no experts")

    import gguf

    t0 = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    w = gguf.GGUFWriter(args.out, args.arch)
    w.add_name(args.name)
    w.add_context_length(args.ctx)
    w.add_embedding_length(args.embd)
    w.add_block_count(args.layers)
    w.add_feed_forward_length(args.ffn)
    w.add_head_count(args.heads)
    w.add_head_count_kv(args.kv_heads)
    head_dim = args.head_dim or args.embd // args.heads
    w.add_rope_dimension_count(head_dim)
    if head_dim != args.embd // args.heads or gemma:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    if args.experts:
        w.add_expert_count(args.experts)
        w.add_expert_used_count(args.experts_used or 1)
    w.add_layer_norm_rms_eps(1e-5 if not gemma else 1e-6)
    if gemma:
        w.add_sliding_window(args.swa)
    w.add_rope_freq_base(10000.0)
    q4k = args.qtype == "q4_k"
    # all-Q4_K is closest to llama.cpp's Q4_K_S label (Q4_K_M mixes in Q6_K tensors)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_S if q4k else gguf.LlamaFileType.MOSTLY_F16)
    n_vocab = copy_tokenizer(w, args.vocab)
    w.add_vocab_size(n_vocab)

    kv = args.kv_heads * head_dim
    q_dim = args.heads * head_dim
    pool: list[np.ndarray] = []

    def q4k_blocks(nbytes: int) -> np.ndarray:
        """Random Q4_K bytes (144-byte blocks of 256 weights: fp16 d, fp16 dmin, 12 bytes of
        6-bit scales, 128 bytes of 4-bit quants) with d and dmin fixed small, so weights stay
        within ~0.06 and activations finite. One pool serves every tensor (views), so a 30B
        shape costs no 17 GB of RAM; the values do not matter, the bytes read per token do."""
        if not pool or pool[0].size < nbytes:
            blocks = rng.integers(0, 256, size=(max(nbytes, 1 << 20) + 143) // 144 * 144, dtype=np.uint8)
            b = blocks.reshape(-1, 144)
            b[:, 0:2] = np.frombuffer(np.float16(6.2e-5).tobytes(), dtype=np.uint8)
            b[:, 2:4] = np.frombuffer(np.float16(6.2e-5).tobytes(), dtype=np.uint8)
            pool[:] = [blocks]
        return pool[0][:nbytes]

    def mat(rows: int, cols: int, experts: int = 0) -> np.ndarray:
        # numpy shape (rows, cols) is GGUF's ne = [cols, rows]: `cols` is the input dimension
        if q4k:
            assert cols % 256 == 0, f"Q4_K needs rows of a multiple of 256 weights, got {cols}"
            shape = ((experts,) if experts else ()) + (rows, cols // 256 * 144)
            return q4k_blocks(int(np.prod(shape))).reshape(shape)
        shape = ((experts,) if experts else ()) + (rows, cols)
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16)

    raw = {"raw_dtype": gguf.GGMLQuantizationType.Q4_K} if q4k else {}

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    w.add_tensor("token_embd.weight", mat(n_vocab, args.embd), **raw)
    e = args.experts
    for i in range(args.layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", ones(args.embd))
        w.add_tensor(p + "attn_q.weight", mat(q_dim, args.embd), **raw)
        w.add_tensor(p + "attn_k.weight", mat(kv, args.embd), **raw)
        w.add_tensor(p + "attn_v.weight", mat(kv, args.embd), **raw)
        w.add_tensor(p + "attn_output.weight", mat(args.embd, q_dim), **raw)
        if gemma:
            w.add_tensor(p + "attn_q_norm.weight", ones(head_dim))
            w.add_tensor(p + "attn_k_norm.weight", ones(head_dim))
            w.add_tensor(p + "post_attention_norm.weight", ones(args.embd))
            w.add_tensor(p + "post_ffw_norm.weight", ones(args.embd))
        w.add_tensor(p + "ffn_norm.weight", ones(args.embd))
        if e:
            w.add_tensor(p + "ffn_gate_inp.weight", (rng.standard_normal((e, args.embd), dtype=np.float32) * 0.02))
            w.add_tensor(p + "ffn_gate_exps.weight", mat(args.ffn, args.embd, e), **raw)
            w.add_tensor(p + "ffn_up_exps.weight", mat(args.ffn, args.embd, e), **raw)
            w.add_tensor(p + "ffn_down_exps.weight", mat(args.embd, args.ffn, e), **raw)
        else:
            w.add_tensor(p + "ffn_gate.weight", mat(args.ffn, args.embd), **raw)
            w.add_tensor(p + "ffn_up.weight", mat(args.ffn, args.embd), **raw)
            w.add_tensor(p + "ffn_down.weight", mat(args.embd, args.ffn), **raw)
    w.add_tensor("output_norm.weight", ones(args.embd))
    if not gemma:  # Gemma ties the output to the token embedding
        w.add_tensor("output.weight", mat(n_vocab, args.embd), **raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    ffn = 3 * args.ffn * args.embd * max(1, e)
    params = n_vocab * args.embd * (1 if gemma else 2) + args.layers * (2 * q_dim * args.embd + 2 * kv * args.embd + ffn)
    active = params - args.layers * ffn * (1 - (args.experts_used or 1) / e) if e else params
    print(f"wrote {args.out}: {params / 1e6:.0f}M parameters ({active / 1e6:.0f}M active, "
          f"{'Q4_K' if q4k else 'F16'}), vocab {n_vocab}, "
          f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
