"""XXH64 (seed 0), the checksum the daemon sends with each artifact (protocol/PROTOCOL.md, section
6). Written from the algorithm's definition; pure Python, about 30 MB/s, which is enough for
artifacts (the digits model's is 73 KiB)."""

_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5
_M = 0xFFFFFFFFFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * _P2) & _M
    acc = ((acc << 31) | (acc >> 33)) & _M
    return (acc * _P1) & _M


def _merge(acc: int, v: int) -> int:
    acc ^= _round(0, v)
    return (acc * _P1 + _P4) & _M


def xxh64(data: bytes, seed: int = 0) -> int:
    """The XXH64 of data as an integer."""
    mv = memoryview(data).cast("B")
    n = len(mv)
    i = 0
    if n >= 32:
        v1 = (seed + _P1 + _P2) & _M
        v2 = (seed + _P2) & _M
        v3 = seed
        v4 = (seed - _P1) & _M
        stripes = n // 32
        lanes = memoryview(bytes(mv[: stripes * 32])).cast("Q")
        r = _round
        for k in range(0, stripes * 4, 4):
            v1 = r(v1, lanes[k])
            v2 = r(v2, lanes[k + 1])
            v3 = r(v3, lanes[k + 2])
            v4 = r(v4, lanes[k + 3])
        i = stripes * 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M
        h = _merge(h, v1)
        h = _merge(h, v2)
        h = _merge(h, v3)
        h = _merge(h, v4)
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 8 <= n:
        k1 = _round(0, int.from_bytes(mv[i:i + 8], "little"))
        h = (_rotl(h ^ k1, 27) * _P1 + _P4) & _M
        i += 8
    if i + 4 <= n:
        h ^= (int.from_bytes(mv[i:i + 4], "little") * _P1) & _M
        h = (_rotl(h, 23) * _P2 + _P3) & _M
        i += 4
    while i < n:
        h ^= (mv[i] * _P5) & _M
        h = (_rotl(h, 11) * _P1) & _M
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _M
    h ^= h >> 29
    h = (h * _P3) & _M
    h ^= h >> 32
    return h


def xxh64_hex(data: bytes) -> str:
    """The XXH64 (seed 0) as 16 lowercase hex digits, as the protocol writes it."""
    return "%016x" % xxh64(data)
