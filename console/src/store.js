// The signed-in session and the pending approvals, shared by the header (badge, title) and the pages.
import { api } from './api.js'
import { events, debounce, poll } from './events.js'

export const session = { current: null }
export const can = {
  decide: () => ['approver', 'admin'].includes(session.current?.role),
  mutate: () => ['agent', 'admin'].includes(session.current?.role),
  admin: () => session.current?.role === 'admin',
  guest: () => ['agent', 'admin'].includes(session.current?.role), // files, processes, ports
}

// Pending approvals (approver and admin keys only; an agent's GET /v1/approvals is 403).
export const approvals = {
  list: [],
  loaded: false,
  error: null,
  listeners: new Set(),
  on(fn) { this.listeners.add(fn); return () => this.listeners.delete(fn) },
  emit() { for (const fn of this.listeners) fn(this) },
  async refresh() {
    if (!can.decide()) return
    try {
      const r = await api.get('/v1/approvals')
      this.list = (r && r.approvals) || []
      this.error = null
    } catch (e) { this.error = e }
    this.loaded = true
    this.emit()
  },
  reset() { this.list = []; this.loaded = false; this.error = null; this.emit() },
}

let stops = []
export function startLive() {
  stopLive()
  events.start()
  const refresh = debounce(() => approvals.refresh(), 200)
  stops.push(events.on((e) => {
    const t = String(e.type)
    if (t.startsWith('approval') || t === 'exec.pending_approval' || t.startsWith('push.') || t.startsWith('sandbox.deleted')) refresh()
  }))
  stops.push(poll(() => approvals.refresh(), 10000))
  approvals.refresh()
}
export function stopLive() {
  for (const s of stops) s()
  stops = []
  events.stop()
  approvals.reset()
}
