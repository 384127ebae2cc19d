"""Read a GGUF file's header (key/value metadata and tensor infos) from its first bytes.

The format is llama.cpp's `docs/gguf.md`: magic "GGUF", a version (2 or 3), the tensor
count and the key/value count (uint64 each), the key/value pairs, then one info per
tensor (name, dimensions, type, offset); the tensor data starts at the next multiple of
`general.alignment` (32 by default).

Why a parser of its own: llama.cpp's `gguf` package reads whole files (`GGUFReader`
memory-maps the tensor data and fails on a file cut after the header), and a fit check
before a download has only the first few megabytes, fetched with HTTP range requests.
The value-type codes and the quantisation block sizes come from the `gguf` package, so
new tensor types are known as soon as llama.cpp publishes them.

`parse_gguf_header(buf)` raises `HeaderIncomplete(needed)` when `buf` ends inside the
header; `needed` is the smallest prefix length that could get further, so the caller can
fetch more and try again. Pure: no I/O.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32

# Arrays of strings (the tokenizer's vocabulary: 50k-260k entries) are walked but not
# kept; numeric arrays up to this length are (per-layer head counts, SWA patterns).
MAX_KEPT_ARRAY = 65536


class NotGGUF(ValueError):
    """The bytes are not a GGUF file (or a version this parser does not read)."""


class HeaderIncomplete(Exception):
    """The buffer ends inside the header; `needed` bytes would let the parse get further."""

    def __init__(self, needed: int, have: int) -> None:
        super().__init__(f"GGUF header needs at least {needed} bytes, have {have}")
        self.needed = needed
        self.have = have


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int  # from the start of the tensor data
    nbytes: int | None  # None: a type the gguf package does not know


@dataclass(frozen=True)
class GGUFHeader:
    version: int
    metadata: dict[str, Any]  # key -> value; string arrays kept as their length only
    string_arrays: dict[str, int] = field(default_factory=dict)  # key -> element count
    tensors: tuple[TensorInfo, ...] = ()
    header_bytes: int = 0  # where the tensor infos end
    data_offset: int = 0  # where the tensor data starts (aligned)

    @property
    def architecture(self) -> str | None:
        arch = self.metadata.get("general.architecture")
        return arch if isinstance(arch, str) and arch else None

    @property
    def parameter_count(self) -> int:
        return sum(math.prod(t.shape) for t in self.tensors)

    @property
    def tensor_bytes(self) -> int | None:
        """The tensor data's size, or None when a tensor's type is unknown."""
        sizes = [t.nbytes for t in self.tensors]
        return None if any(s is None for s in sizes) else sum(sizes)  # type: ignore[misc]


def _gguf():
    import gguf  # llama.cpp's package: value-type codes and quant block sizes

    return gguf


class _Cursor:
    def __init__(self, buf: bytes | memoryview, endian: str) -> None:
        self.buf = buf
        self.pos = 0
        self.e = endian

    def need(self, n: int) -> None:
        if self.pos + n > len(self.buf):
            raise HeaderIncomplete(self.pos + n, len(self.buf))

    def unpack(self, fmt: str) -> Any:
        s = struct.Struct(self.e + fmt)
        self.need(s.size)
        (v,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return v

    def many(self, fmt: str, n: int) -> tuple[Any, ...]:
        s = struct.Struct(f"{self.e}{n}{fmt}")
        self.need(s.size)
        out = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return out

    def string(self) -> str:
        n = self.unpack("Q")
        self.need(n)
        raw = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return raw.decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        n = self.unpack("Q")
        self.need(n)
        self.pos += n


def _scalar_formats() -> dict[int, str]:
    t = _gguf().GGUFValueType
    return {
        t.UINT8: "B", t.INT8: "b", t.UINT16: "H", t.INT16: "h", t.UINT32: "I", t.INT32: "i",
        t.FLOAT32: "f", t.BOOL: "?", t.UINT64: "Q", t.INT64: "q", t.FLOAT64: "d",
    }


def _value(cur: _Cursor, vtype: int, key: str, formats: dict[int, str], string_arrays: dict[str, int]) -> Any:
    t = _gguf().GGUFValueType
    if vtype == t.STRING:
        return cur.string()
    if vtype in formats:
        return cur.unpack(formats[vtype])
    if vtype == t.ARRAY:
        sub = cur.unpack("I")
        n = cur.unpack("Q")
        if sub == t.STRING:
            for _ in range(n):
                cur.skip_string()
            string_arrays[key] = n
            return None
        if sub in formats:
            if n > MAX_KEPT_ARRAY:
                cur.need(n * struct.calcsize(formats[sub]))
                cur.pos += n * struct.calcsize(formats[sub])
                return None
            return list(cur.many(formats[sub], n))
        if sub == t.ARRAY:
            raise NotGGUF(f"nested arrays in {key!r} are not supported")
        raise NotGGUF(f"unknown array element type {sub} in {key!r}")
    raise NotGGUF(f"unknown value type {vtype} for {key!r}")


def _tensor_nbytes(shape: tuple[int, ...], ggml_type: int) -> int | None:
    sizes = _gguf().GGML_QUANT_SIZES
    try:
        block, type_size = sizes[_gguf().GGMLQuantizationType(ggml_type)]
    except (ValueError, KeyError):
        return None
    return math.prod(shape) // block * type_size


def parse_gguf_header(buf: bytes | memoryview) -> GGUFHeader:
    """The header at the start of `buf` (NotGGUF, or HeaderIncomplete when `buf` is short)."""
    if len(buf) < 8:
        if bytes(buf[:4]) != GGUF_MAGIC[:len(buf[:4])]:
            raise NotGGUF("the file does not start with GGUF's magic bytes")
        raise HeaderIncomplete(24, len(buf))
    if bytes(buf[:4]) != GGUF_MAGIC:
        raise NotGGUF(f"the file does not start with GGUF's magic bytes (got {bytes(buf[:4])!r})")
    # Big-endian GGUFs exist (s390x builds): the version reads small in the file's order.
    le, be = struct.unpack_from("<I", buf, 4)[0], struct.unpack_from(">I", buf, 4)[0]
    endian = "<" if le < 65536 else ">"
    version = le if endian == "<" else be
    if version not in (2, 3):
        raise NotGGUF(f"GGUF version {version} is not supported (2 and 3 are)")
    cur = _Cursor(buf, endian)
    cur.pos = 8
    n_tensors = cur.unpack("Q")
    n_kv = cur.unpack("Q")
    formats = _scalar_formats()
    metadata: dict[str, Any] = {}
    string_arrays: dict[str, int] = {}
    for _ in range(n_kv):
        key = cur.string()
        vtype = cur.unpack("I")
        metadata[key] = _value(cur, vtype, key, formats, string_arrays)
    for key in string_arrays:
        metadata.pop(key, None)
    tensors: list[TensorInfo] = []
    for _ in range(n_tensors):
        name = cur.string()
        n_dims = cur.unpack("I")
        if n_dims > 8:
            raise NotGGUF(f"tensor {name!r} claims {n_dims} dimensions")
        shape = tuple(cur.many("Q", n_dims)) if n_dims else ()
        ggml_type = cur.unpack("I")
        offset = cur.unpack("Q")
        tensors.append(TensorInfo(name, shape, ggml_type, offset, _tensor_nbytes(shape, ggml_type)))
    align = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(align, int) or isinstance(align, bool) or align <= 0:
        align = DEFAULT_ALIGNMENT
    end = cur.pos
    return GGUFHeader(
        version=version,
        metadata=metadata,
        string_arrays=string_arrays,
        tensors=tuple(tensors),
        header_bytes=end,
        data_offset=-(-end // align) * align,
    )


def file_type_label(file_type: Any) -> str | None:
    """`general.file_type` as llama.cpp names it ("Q4_K_M"), or None."""
    if not isinstance(file_type, int) or isinstance(file_type, bool):
        return None
    try:
        return _gguf().LlamaFileType(file_type).name.removeprefix("MOSTLY_")
    except ValueError:
        return None


def model_info(header: GGUFHeader) -> Mapping[str, Any]:
    """The header's metadata in /api/show's `model_info` shape (what core.fit reads)."""
    info = dict(header.metadata)
    info.setdefault("general.parameter_count", header.parameter_count)
    return info
