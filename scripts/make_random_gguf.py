"""Write a random-weight llama-architecture GGUF for engine benches on a machine with no models.

The weights are noise, so the text is nonsense, but the shapes, the bytes read per token
and so the decode speed are those of a real model of that size. The tokenizer is copied
from a vocab-only GGUF (llama.cpp ships several as models/ggml-vocab-*.gguf). Needs
numpy and the `gguf` package (PyPI `gguf`, or llama.cpp's gguf-py on PYTHONPATH).

    python scripts/make_random_gguf.py --vocab ggml-vocab-llama-spm.gguf --out rand.gguf \
        --embd 1024 --layers 12 --heads 16 --kv-heads 8 --ffn 4096
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
    args = ap.parse_args(argv)

    import gguf

    t0 = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    w = gguf.GGUFWriter(args.out, "llama")
    w.add_name(args.name)
    w.add_context_length(args.ctx)
    w.add_embedding_length(args.embd)
    w.add_block_count(args.layers)
    w.add_feed_forward_length(args.ffn)
    w.add_head_count(args.heads)
    w.add_head_count_kv(args.kv_heads)
    w.add_rope_dimension_count(args.embd // args.heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    n_vocab = copy_tokenizer(w, args.vocab)
    w.add_vocab_size(n_vocab)

    head_dim = args.embd // args.heads
    kv = args.kv_heads * head_dim

    def mat(rows: int, cols: int) -> np.ndarray:
        # numpy shape (rows, cols) is GGUF's ne = [cols, rows]: `cols` is the input dimension
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    w.add_tensor("token_embd.weight", mat(n_vocab, args.embd))
    for i in range(args.layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", ones(args.embd))
        w.add_tensor(p + "attn_q.weight", mat(args.embd, args.embd))
        w.add_tensor(p + "attn_k.weight", mat(kv, args.embd))
        w.add_tensor(p + "attn_v.weight", mat(kv, args.embd))
        w.add_tensor(p + "attn_output.weight", mat(args.embd, args.embd))
        w.add_tensor(p + "ffn_norm.weight", ones(args.embd))
        w.add_tensor(p + "ffn_gate.weight", mat(args.ffn, args.embd))
        w.add_tensor(p + "ffn_up.weight", mat(args.ffn, args.embd))
        w.add_tensor(p + "ffn_down.weight", mat(args.embd, args.ffn))
    w.add_tensor("output_norm.weight", ones(args.embd))
    w.add_tensor("output.weight", mat(n_vocab, args.embd))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    params = n_vocab * args.embd * 2 + args.layers * (2 * args.embd * args.embd + 2 * kv * args.embd
                                                     + 3 * args.ffn * args.embd)
    print(f"wrote {args.out}: {params / 1e6:.0f}M parameters (F16), vocab {n_vocab}, "
          f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
