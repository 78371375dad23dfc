// A sandbox's audit log as a live timeline: commands with exit codes, decisions, egress, packages, file
// writes, lifecycle. Paged in with the `after` cursor; later refreshes fetch only what is new.
import { h, replace } from '../dom.js'
import { api, enc, errText } from '../api.js'
import { badge } from '../components/badge.js'
import { clock, time, bytes, compactJson } from '../format.js'

const KEEP = 1000
const GROUPS = [
  ['all', 'All', () => true],
  ['commands', 'Commands', (t) => t.startsWith('exec.') || t.startsWith('process.')],
  ['decisions', 'Decisions', (t) => t.startsWith('approval.') || t.startsWith('push.') || t === 'exec.denied' || t === 'exec.pending_approval' || t.startsWith('evidence.')],
  ['network', 'Network', (t) => t.startsWith('egress.') || t.startsWith('network.') || t.startsWith('port.')],
  ['packages', 'Packages', (t) => t.startsWith('package.')],
  ['files', 'Files', (t) => t.startsWith('file.') || t.startsWith('workspace.')],
  ['lifecycle', 'Lifecycle', (t) => t.startsWith('sandbox.') || t.startsWith('snapshot.') || t.startsWith('secret.')],
]

function summary(e) {
  const d = e.data || {}
  const t = e.type
  const parts = []
  const cmd = d.command || (Array.isArray(d.argv) ? d.argv.join(' ') : d.shell) || ''
  if (t.startsWith('exec.')) {
    if (cmd) parts.push(h('code.cmd', cmd))
    if (d.exit_code !== undefined) parts.push(badge('exit ' + d.exit_code, d.exit_code === 0 ? 'ok' : 'bad'))
    if (d.timed_out) parts.push(badge('timed out', 'bad'))
    if (d.policy && d.policy.decision && t !== 'exec.executed') parts.push(h('span.sub', `${d.policy.decision} · ${d.policy.class || ''}${d.policy.reason ? ' · ' + d.policy.reason : ''}`))
    if (d.duration_ms !== undefined) parts.push(h('span.sub', d.duration_ms + ' ms'))
    if (d.user && d.user !== 'user') parts.push(h('span.sub', 'as ' + d.user))
    if (d.error) parts.push(h('span.sub.error-text', d.error))
  } else if (t.startsWith('approval.') || t.startsWith('push.')) {
    if (cmd) parts.push(h('code.cmd', cmd))
    if (d.approval_id) parts.push(h('span.mono.sub', d.approval_id))
    if (d.by) parts.push(h('span.sub', 'by ' + d.by))
    if (d.reason) parts.push(h('span.sub', '“' + d.reason + '”'))
    if (d.branch) parts.push(h('span.sub', 'branch ' + d.branch))
  } else if (t.startsWith('egress.')) {
    parts.push(h('code.cmd', `${d.method && d.method !== 'CONNECT' ? d.method + ' ' : ''}${d.destination || d.host || '?'}${d.port && !(d.destination || '').includes(':') ? ':' + d.port : ''}`))
    if (d.decision) parts.push(badge(d.decision))
    if (d.reason) parts.push(h('span.sub', d.reason))
    if (d.bytes_sent !== undefined || d.bytes_received !== undefined) parts.push(h('span.sub', `${bytes(d.bytes_sent)} out · ${bytes(d.bytes_received)} in`))
    if (d.secret) parts.push(h('span.sub', 'secret ' + d.secret))
  } else if (t.startsWith('package.')) {
    parts.push(h('code.cmd', `${d.ecosystem ? d.ecosystem + ':' : ''}${d.name || d.path || '?'}${d.version ? '@' + d.version : ''}`))
    if (d.decision) parts.push(badge(d.decision))
    if (d.rule) parts.push(h('span.sub', 'rule ' + d.rule))
    if (d.reason) parts.push(h('span.sub', d.reason))
    if (d.count !== undefined) parts.push(h('span.sub', d.count + ' suppressed'))
  } else if (t === 'file.written') {
    parts.push(h('code.cmd', d.path || '?'))
    if (d.size !== undefined) parts.push(h('span.sub', bytes(d.size)))
  } else if (t === 'file.activity') {
    const n = Array.isArray(d.paths) ? d.paths.length : 0
    parts.push(h('span', `${n} path${n === 1 ? '' : 's'} read or written${d.mechanism ? ' (' + d.mechanism + ')' : ''}`))
  } else {
    const text = compactJson(d, 240)
    if (text && text !== '{}') parts.push(h('span.sub.mono', text))
  }
  return parts
}

export function timeline(sandboxId) {
  let events = []
  let cursor = null
  let group = 'all'
  let busy = false
  const list = h('ol.timeline', { 'aria-label': 'Audit events, newest first' })
  const note = h('p.status-line', { role: 'status' })
  const chips = h('div.chips', { role: 'group', 'aria-label': 'Show' }, GROUPS.map(([id, label]) => {
    const b = h('button.chip', { type: 'button', 'aria-pressed': String(id === group) }, label)
    b.addEventListener('click', () => {
      group = id
      for (const x of chips.children) x.setAttribute('aria-pressed', String(x === b))
      draw()
    })
    return b
  }))

  function draw() {
    const pred = GROUPS.find((g) => g[0] === group)[2]
    const shown = events.filter((e) => pred(e.type)).slice(-400).reverse()
    replace(list, shown.length ? shown.map((e) => h('li.tl-item.tl-' + e.type.split('.')[0],
      h('time.tl-time', { datetime: e.at, title: time(e.at) }, clock(e.at)),
      h('span.tl-type', e.type),
      h('div.tl-body', summary(e)))) : h('li.tl-empty', 'No events yet.'))
  }

  async function refresh() {
    if (busy) return
    busy = true
    try {
      for (let page = 0; page < 20; page++) {
        const q = cursor !== null ? `?after=${cursor}&limit=500` : '?limit=500'
        const r = await api.get(`/v1/sandboxes/${enc(sandboxId)}/audit${q}`)
        const got = (r && r.events) || []
        if (got.length) {
          events = events.concat(got)
          cursor = got[got.length - 1].seq
        }
        if (events.length > KEEP) events = events.slice(-KEEP)
        if (r && r.next_after !== undefined && r.next_after !== null && got.length) { cursor = r.next_after; continue }
        break
      }
      note.textContent = ''
      draw()
    } catch (e) {
      note.textContent = 'Could not load the audit log: ' + errText(e)
    } finally { busy = false }
  }

  const el = h('div.timeline-wrap', chips, list, note)
  return { el, refresh }
}
