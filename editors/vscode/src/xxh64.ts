// XXH64 (seed 0), the checksum tthd gives for every artifact (protocol/PROTOCOL.md, section 6):
// the client checks the bytes it received, or read from the daemon's cache file, against it.
// The algorithm and its five primes are XXH64's published definition (docs/editor.md).

const M = (1n << 64n) - 1n;
const P1 = 0x9e3779b185ebca87n;
const P2 = 0xc2b2ae3d27d4eb4fn;
const P3 = 0x165667b19e3779f9n;
const P4 = 0x85ebca77c2b2ae63n;
const P5 = 0x27d4eb2f165667c5n;

const rotl = (x: bigint, r: bigint): bigint => ((x << r) | (x >> (64n - r))) & M;
const round = (acc: bigint, lane: bigint): bigint => (rotl((acc + lane * P2) & M, 31n) * P1) & M;
const merge = (h: bigint, v: bigint): bigint => (((h ^ round(0n, v)) * P1 + P4) & M);

/** XXH64 of data with seed 0, as 16 lowercase hex digits. */
export function xxh64(data: Uint8Array): string {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const len = data.byteLength;
  let p = 0;
  let h: bigint;
  if (len >= 32) {
    let v1 = (P1 + P2) & M, v2 = P2, v3 = 0n, v4 = (M + 1n - P1) & M;
    for (; p + 32 <= len; p += 32) {
      v1 = round(v1, view.getBigUint64(p, true));
      v2 = round(v2, view.getBigUint64(p + 8, true));
      v3 = round(v3, view.getBigUint64(p + 16, true));
      v4 = round(v4, view.getBigUint64(p + 24, true));
    }
    h = (rotl(v1, 1n) + rotl(v2, 7n) + rotl(v3, 12n) + rotl(v4, 18n)) & M;
    h = merge(h, v1);
    h = merge(h, v2);
    h = merge(h, v3);
    h = merge(h, v4);
  } else {
    h = P5;
  }
  h = (h + BigInt(len)) & M;
  for (; p + 8 <= len; p += 8) h = (rotl(h ^ round(0n, view.getBigUint64(p, true)), 27n) * P1 + P4) & M;
  if (p + 4 <= len) {
    h = (rotl(h ^ ((BigInt(view.getUint32(p, true)) * P1) & M), 23n) * P2 + P3) & M;
    p += 4;
  }
  for (; p < len; p++) h = (rotl(h ^ ((BigInt(data[p]) * P5) & M), 11n) * P1) & M;
  h ^= h >> 33n;
  h = (h * P2) & M;
  h ^= h >> 29n;
  h = (h * P3) & M;
  h ^= h >> 32n;
  return h.toString(16).padStart(16, '0');
}
