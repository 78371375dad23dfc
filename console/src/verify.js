// Checks an evidence bundle in the browser, as `airlock evidence verify` does in part: every file's
// SHA-256 against SHA256SUMS (and nothing unlisted), and SHA256SUMS.sig (ECDSA P-256, DER) with the key
// the manifest names, taken from GET /v1/evidence/keys. WebCrypto needs a secure context (HTTPS or
// loopback); elsewhere the result says it could not check.
const hex = (buf) => [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, '0')).join('')

function derToRaw(der) {
  // SEQUENCE { INTEGER r, INTEGER s } -> r||s, 32 bytes each
  let i = 0
  const take = () => {
    if (der[i++] !== 0x02) throw new Error('not a DER integer')
    let len = der[i++]
    if (len & 0x80) { const n = len & 0x7f; len = 0; for (let k = 0; k < n; k++) len = (len << 8) | der[i++] }
    let v = der.subarray(i, i + len); i += len
    while (v.length > 32 && v[0] === 0) v = v.subarray(1)
    const out = new Uint8Array(32); out.set(v, 32 - v.length); return out
  }
  if (der[i++] !== 0x30) throw new Error('not a DER sequence')
  let len = der[i++]
  if (len & 0x80) i += len & 0x7f
  const r = take(), s = take()
  const raw = new Uint8Array(64); raw.set(r, 0); raw.set(s, 32); return raw
}

function pemToDer(pem) {
  const b64 = String(pem).replace(/-----[^-]+-----/g, '').replace(/\s+/g, '')
  return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))
}

// -> {status: 'verified'|'invalid'|'unchecked', problems: [], passed: [], keyid}
export async function verifyBundle(files, manifest, keys) {
  const res = { status: 'unchecked', problems: [], passed: [], keyid: manifest && manifest.signing ? manifest.signing.keyid : '' }
  const subtle = globalThis.crypto && globalThis.crypto.subtle
  if (!subtle) { res.problems.push('this page is not a secure context (HTTPS or loopback): the browser cannot check signatures'); return res }
  const sums = files.get('SHA256SUMS'), sig = files.get('SHA256SUMS.sig')
  if (!sums || !sig) { res.status = 'invalid'; res.problems.push('SHA256SUMS or SHA256SUMS.sig is missing'); return res }
  const listed = new Map()
  for (const line of new TextDecoder().decode(sums).split('\n')) {
    if (!line) continue
    const m = /^([0-9a-f]{64}) [ *](.+)$/.exec(line)
    if (!m) { res.problems.push('SHA256SUMS has a malformed line'); continue }
    listed.set(m[2], m[1])
  }
  let bad = 0
  for (const [p, want] of listed) {
    const b = files.get(p)
    if (!b) { res.problems.push('listed but missing: ' + p); bad++; continue }
    if (hex(await subtle.digest('SHA-256', b)) !== want) { res.problems.push('sha256 differs: ' + p); bad++ }
  }
  for (const p of files.keys()) if (p !== 'SHA256SUMS' && p !== 'SHA256SUMS.sig' && !listed.has(p)) { res.problems.push('not listed in SHA256SUMS: ' + p); bad++ }
  if (!bad) res.passed.push(`SHA256SUMS covers every file and every sum holds (${listed.size} files)`)
  const candidates = (keys || []).filter((k) => !res.keyid || k.keyid === res.keyid)
  if (!candidates.length) res.problems.push(res.keyid ? 'the signing key ' + res.keyid.slice(0, 16) + '… is not among the server\'s evidence keys' : 'no evidence key to check with')
  let sigOk = false
  for (const k of candidates) {
    try {
      const key = await subtle.importKey('spki', pemToDer(k.public_key_pem), { name: 'ECDSA', namedCurve: 'P-256' }, false, ['verify'])
      if (await subtle.verify({ name: 'ECDSA', hash: 'SHA-256' }, key, derToRaw(sig), sums)) { sigOk = true; res.keyid = k.keyid; break }
    } catch (e) { res.problems.push('key ' + String(k.keyid).slice(0, 16) + '…: ' + e.message) }
  }
  if (sigOk) res.passed.push('SHA256SUMS.sig verifies with key ' + res.keyid.slice(0, 16) + '…')
  else if (candidates.length) res.problems.push('SHA256SUMS.sig does not verify')
  res.status = sigOk && !bad ? 'verified' : 'invalid'
  return res
}
