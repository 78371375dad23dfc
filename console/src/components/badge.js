import { h } from '../dom.js'

const TONE = {
  running: 'ok', ready: 'ok', healthy: 'ok', approved: 'ok', approve: 'ok', allowed: 'ok', allow: 'ok', passed: 'ok', exited: 'muted', pushed: 'ok', verified: 'ok',
  creating: 'info', pending: 'warn', pending_approval: 'warn', paused: 'warn', hibernated: 'warn', draining: 'warn', medium: 'warn', not_run: 'warn', unverified: 'warn', building: 'info', queued: 'info',
  stopped: 'muted', deleting: 'muted', cancelled: 'muted', expired: 'muted', superseded: 'muted', low: 'info', info: 'info',
  error: 'bad', failed: 'bad', denied: 'bad', deny: 'bad', rejected: 'bad', reject: 'bad', down: 'bad', unreachable: 'bad', unavailable: 'bad', high: 'bad', critical: 'bad', invalid: 'bad',
}
export const tone = (s) => TONE[String(s).toLowerCase()] || 'muted'
export const badge = (text, t) => h('span.badge.badge-' + (t || tone(text)), String(text ?? '—'))
