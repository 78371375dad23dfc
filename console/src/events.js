// Live events: an EventSource on /v1/events (the session cookie authenticates it). Each event is only an
// invalidation signal: subscribers refetch what it names. The EventSource retries by itself after a dropped
// connection; when the browser gives up (a refused stream: CLOSED) it is opened again with a backoff.
// Named SSE events reach only listeners of their exact name, so every type airlockd may send is listed:
// the audit log's types (what the stream carries) and the generic names of the console's contract.
// Anything else still arrives through polling.
const TYPES = (
  'sandbox.created sandbox.deleted sandbox.paused sandbox.resumed sandbox.woken sandbox.timeout sandbox.moved ' +
  'sandbox.hibernated sandbox.stopped sandbox.error sandbox.state ' +
  'approval.requested approval.approved approval.denied approval.expired approval.cancelled approval.superseded ' +
  'approval.opened approval.decided ' +
  'exec.allowed exec.denied exec.pending_approval exec.executed exec.failed exec.cancelled command.started command.ended ' +
  'egress egress.allowed egress.denied egress.failed egress.secret_blocked egress.secret_injected egress.suppressed ' +
  'package package.metadata package.artifact package.integrity_failed package.suppressed ' +
  'file.written file.activity file.watch_started file.watch_failed ' +
  'evidence.sealed evidence.reviewed evidence.seal_failed ' +
  'push.requested push.approved push.denied push.pushed push.rejected ' +
  'workspace.cloned workspace.committed workspace.diffed workspace.reset ' +
  'snapshot.created secret.set secret.removed network.updated template.built process.started process.ended ' +
  'port.exposed port.closed agent.protocol_error audit'
).split(' ')

const listeners = new Set()
let source = null
let retry = null
let delay = 1000
let wanted = false
let status = 'off'
const statusListeners = new Set()

function setStatus(s) {
  if (s === status) return
  status = s
  for (const fn of statusListeners) fn(s)
}

function dispatch(e) {
  let data = {}
  try { data = e.data ? JSON.parse(e.data) : {} } catch { data = {} }
  if (!data || typeof data !== 'object') data = {}
  const type = String(data.type || (e.type !== 'message' ? e.type : '') || '')
  const ev = { ...data, type }
  for (const fn of listeners) {
    try { fn(ev) } catch (err) { console.error(err) }
  }
}

function open() {
  clearTimeout(retry)
  if (!wanted || typeof EventSource === 'undefined') return
  const es = new EventSource('/v1/events', { withCredentials: true })
  source = es
  setStatus('connecting')
  es.onopen = () => { delay = 1000; setStatus('live') }
  es.onmessage = dispatch
  for (const t of TYPES) es.addEventListener(t, dispatch)
  es.onerror = () => {
    if (source !== es) return
    if (es.readyState === EventSource.CLOSED) {
      es.close()
      source = null
      setStatus('offline')
      retry = setTimeout(open, delay)
      delay = Math.min(delay * 2, 30000)
    } else setStatus('reconnecting')
  }
}

export const events = {
  start() { if (wanted) return; wanted = true; delay = 1000; open() },
  stop() {
    wanted = false
    clearTimeout(retry)
    if (source) source.close()
    source = null
    setStatus('off')
  },
  on(fn) { listeners.add(fn); return () => listeners.delete(fn) },
  onStatus(fn) { statusListeners.add(fn); fn(status); return () => statusListeners.delete(fn) },
}

// Calls fn at most once per `ms` (trailing), for bursts of events.
export function debounce(fn, ms = 250) {
  let t = null
  const d = (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms) }
  d.cancel = () => clearTimeout(t)
  return d
}

// Runs fn every `ms` while the page is visible, and when it becomes visible again; returns a stop function.
export function poll(fn, ms) {
  let stopped = false
  const tick = () => { if (!stopped && !document.hidden) fn() }
  const id = setInterval(tick, ms)
  const vis = () => { if (!document.hidden) tick() }
  document.addEventListener('visibilitychange', vis)
  return () => { stopped = true; clearInterval(id); document.removeEventListener('visibilitychange', vis) }
}
