export function age(iso, now = Date.now()) {
  const t = Date.parse(iso)
  if (!Number.isFinite(t)) return '—'
  let s = Math.max(0, Math.round((now - t) / 1000))
  if (s < 60) return s + 's'
  const m = Math.floor(s / 60)
  if (m < 60) return m + 'm'
  const hr = Math.floor(m / 60)
  if (hr < 48) return hr + 'h ' + (m % 60) + 'm'
  return Math.floor(hr / 24) + 'd ' + (hr % 24) + 'h'
}

export function until(iso, now = Date.now()) {
  const t = Date.parse(iso)
  if (!Number.isFinite(t)) return ''
  const s = Math.round((t - now) / 1000)
  if (s <= 0) return 'due'
  return 'in ' + age(new Date(now - s * 1000).toISOString(), now)
}

export function time(iso) {
  const t = Date.parse(iso)
  if (!Number.isFinite(t)) return iso ? String(iso) : '—'
  const d = new Date(t)
  const pad = (n) => String(n).padStart(2, '0')
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
}

export function clock(iso) {
  const t = Date.parse(iso)
  if (!Number.isFinite(t)) return ''
  const d = new Date(t)
  const pad = (n) => String(n).padStart(2, '0')
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
}

export function bytes(n) {
  if (n === undefined || n === null || !Number.isFinite(Number(n))) return '—'
  n = Number(n)
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let i = 0
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++ }
  return (i ? n.toFixed(n < 10 ? 1 : 0) : n) + ' ' + u[i]
}

export const mib = (n) => (Number.isFinite(Number(n)) ? (n >= 1024 ? (n / 1024).toFixed(n % 1024 ? 1 : 0) + ' GiB' : n + ' MiB') : '—')
export const short = (s, n = 12) => (s && s.length > n ? s.slice(0, n) + '…' : s || '')
export const pct = (n) => (Number.isFinite(Number(n)) ? Number(n).toFixed(Number(n) < 10 ? 1 : 0) + '%' : '—')
export const plural = (n, one, many = one + 's') => `${n} ${n === 1 ? one : many}`

export function compactJson(v, max = 400) {
  let s
  try { s = JSON.stringify(v) } catch { s = String(v) }
  return s && s.length > max ? s.slice(0, max) + '…' : s
}
