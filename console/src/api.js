// fetch for airlockd's API: same origin, the session cookie, JSON in and out, X-CSRF-Token on every
// mutating request, and {"error":{"code","message"}} bodies turned into readable errors.
let csrf = ''
let onUnauthorized = () => {}

export function setCsrf(token) { csrf = token || '' }
export function setUnauthorizedHandler(fn) { onUnauthorized = fn }

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message)
    this.status = status
    this.code = code
  }
}

const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])
const STATUS_TEXT = {
  400: 'bad request', 401: 'not signed in', 403: 'not allowed for your role', 404: 'not found', 409: 'conflict',
  413: 'too large', 429: 'too many requests or quota exceeded', 502: 'the sandbox agent failed', 503: 'unavailable, try again',
  504: 'timed out', 507: 'the server is short of disk space',
}

async function errorFrom(res) {
  let code = '', message = ''
  try {
    const text = await res.text()
    try {
      const j = JSON.parse(text)
      if (j && j.error) { code = String(j.error.code || ''); message = String(j.error.message || '') }
    } catch { message = text.slice(0, 300) }
  } catch {}
  const what = STATUS_TEXT[res.status] || 'HTTP ' + res.status
  return new ApiError(res.status, code, message ? `${message} (${code || what})` : `${what} (HTTP ${res.status})`)
}

// The raw Response (for streams, downloads). Throws ApiError for a status >= 400.
export async function request(method, path, { body, headers = {}, json = true, signal, quiet401 = false } = {}) {
  const h = { ...headers }
  let payload = body
  if (body !== undefined && json && !(body instanceof Blob) && !(body instanceof ArrayBuffer)) {
    h['Content-Type'] = 'application/json'
    payload = JSON.stringify(body)
  }
  if (MUTATING.has(method) && csrf) h['X-CSRF-Token'] = csrf
  let res
  try {
    res = await fetch(path, { method, headers: h, body: payload, credentials: 'same-origin', cache: 'no-store', signal })
  } catch (e) {
    if (e && e.name === 'AbortError') throw e
    throw new ApiError(0, 'network', 'airlockd did not answer (' + (e && e.message ? e.message : 'network error') + ')')
  }
  if (res.status >= 400) {
    const err = await errorFrom(res)
    if (res.status === 401 && !quiet401) onUnauthorized(err)
    throw err
  }
  return res
}

async function asJson(res) {
  if (res.status === 204) return null
  const text = await res.text()
  if (!text) return null
  try { return JSON.parse(text) } catch { return text }
}

export const api = {
  get: (p, o) => request('GET', p, o).then(asJson),
  post: (p, body, o) => request('POST', p, { ...o, body: body === undefined ? {} : body }).then(asJson),
  put: (p, body, o) => request('PUT', p, { ...o, body }).then(asJson),
  patch: (p, body, o) => request('PATCH', p, { ...o, body }).then(asJson),
  del: (p, o) => request('DELETE', p, o).then(asJson),
  text: (p, o) => request('GET', p, o).then((r) => r.text()),
}

export const enc = encodeURIComponent
export const errText = (e) => (e && e.message) || String(e)
