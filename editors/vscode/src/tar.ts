// The files of an artifact (a POSIX ustar archive, docs/artifact.md): 512-byte headers, each
// file's data padded to 512 bytes, two zero blocks at the end. Read to show the compile report
// it carries (explain/report.html) and its list of files.

export interface TarEntry {
  name: string;
  size: number;
  data: Buffer;
}

function field(h: Buffer, off: number, len: number): string {
  const b = h.subarray(off, off + len);
  const z = b.indexOf(0);
  return b.subarray(0, z < 0 ? len : z).toString('utf8');
}

/** Every regular file of the archive; throws on a damaged one. */
export function readTar(tar: Buffer): TarEntry[] {
  const out: TarEntry[] = [];
  let p = 0;
  let longName: string | null = null;
  while (p + 512 <= tar.length) {
    const h = tar.subarray(p, p + 512);
    if (h.every((b) => b === 0)) break;
    let sum = 0;
    for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 32 : h[i];
    const stored = parseInt(field(h, 148, 8).trim(), 8);
    if (stored !== sum) throw new Error(`the archive's header at byte ${p} is damaged (checksum)`);
    const size = parseInt(field(h, 124, 12).trim() || '0', 8);
    const type = String.fromCharCode(h[156] || 48);
    const prefix = field(h, 345, 155);
    let name = longName ?? (prefix ? `${prefix}/${field(h, 0, 100)}` : field(h, 0, 100));
    longName = null;
    const start = p + 512;
    if (start + size > tar.length) throw new Error(`the archive ends inside ${name}`);
    const data = tar.subarray(start, start + size);
    if (type === 'L') longName = data.toString('utf8').replace(/\0+$/, '');
    else if (type === '0' || type === '\0') out.push({ name: name.replace(/^\.\//, ''), size, data });
    p = start + Math.ceil(size / 512) * 512;
  }
  return out;
}
