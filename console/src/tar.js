// Reads an evidence bundle (.tar.gz) in the browser: gunzip with DecompressionStream, then ustar entries
// (with pax "path" records). Returns Map(path relative to the bundle's root directory -> Uint8Array).
export async function gunzip(bytes) {
  if (typeof DecompressionStream === 'undefined') throw new Error('this browser cannot decompress gzip')
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'))
  return new Uint8Array(await new Response(stream).arrayBuffer())
}

const dec = new TextDecoder()
const str = (b, off, len) => { let end = off; while (end < off + len && b[end]) end++; return dec.decode(b.subarray(off, end)) }
const oct = (b, off, len) => parseInt(str(b, off, len).trim() || '0', 8)

export function untar(buf) {
  const files = new Map()
  let off = 0, paxPath = null, longName = null
  while (off + 512 <= buf.length) {
    const hdr = buf.subarray(off, off + 512)
    if (hdr.every((x) => x === 0)) break
    const size = oct(hdr, 124, 12)
    const type = String.fromCharCode(hdr[156] || 48)
    let name = str(hdr, 0, 100)
    const prefix = str(hdr, 345, 155)
    if (prefix) name = prefix + '/' + name
    const data = buf.subarray(off + 512, off + 512 + size)
    off += 512 + Math.ceil(size / 512) * 512
    if (type === 'x') {
      for (const rec of dec.decode(data).split('\n')) {
        const m = /^\d+ path=(.*)$/.exec(rec)
        if (m) paxPath = m[1]
      }
      continue
    }
    if (type === 'L') { longName = str(data, 0, data.length); continue }
    if (type === 'g') continue
    const full = paxPath || longName || name
    paxPath = longName = null
    if (type === '0' || type === '\0' || type === '7') files.set(full, data)
  }
  // strip the bundle's top directory (evd-…/)
  const out = new Map()
  const tops = new Set([...files.keys()].map((k) => k.split('/')[0]))
  const strip = tops.size === 1 && [...files.keys()].every((k) => k.includes('/'))
  for (const [k, v] of files) out.set(strip ? k.slice(k.indexOf('/') + 1) : k, v)
  return out
}

export const text = (files, p) => (files.has(p) ? dec.decode(files.get(p)) : null)
export function json(files, p) {
  const t = text(files, p)
  if (t === null) return null
  try { return JSON.parse(t) } catch { return null }
}
export function jsonl(files, p) {
  const t = text(files, p)
  if (t === null) return null
  return t.split('\n').filter((l) => l.trim()).map((l) => { try { return JSON.parse(l) } catch { return { unparsed: l } } })
}
