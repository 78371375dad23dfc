// #/sandboxes/{id}: the terminal, lifecycle, and tabs for the live timeline, files, processes, previews
// and evidence bundles.
import { h, dl, replace } from '../dom.js'
import { api, enc, errText } from '../api.js'
import { events, debounce, poll } from '../events.js'
import { can, approvals } from '../store.js'
import { badge } from '../components/badge.js'
import { tabs } from '../components/tabs.js'
import { toast, toastError } from '../components/toast.js'
import { dataTable } from '../components/table.js'
import { lifecycleButtons } from '../lifecycle.js'
import { timeline } from './timeline.js'
import { filesTab, processesTab, portsTab } from './guest.js'
import { age, time, until, mib, bytes, pct } from '../format.js'

export function sandboxPage({ main, params, setTitle, navigate }) {
  const id = params[0]
  setTitle(id)
  const stops = []
  let sb = null
  let latest = null

  const title = h('h1.mono', id)
  const stateEl = h('span')
  const actions = h('div.head-actions')
  const facts = h('div.facts')
  const pendingNote = h('div')

  // --- terminal -----------------------------------------------------------------------------------------
  const termStatus = h('span.term-status', { role: 'status' }, 'Connecting…')
  const termBox = h('div.terminal', { 'data-testid': 'terminal', role: 'group', tabindex: '-1', 'aria-label': 'Terminal: a shell in ' + id + '. Click to type.' })
  const reconnect = h('button.btn.btn-small', { type: 'button' }, 'New session')
  const ctrlC = h('button.btn.btn-small', { type: 'button', title: 'Send an interrupt (SIGINT) to the shell' }, 'Ctrl-C')
  const termPanel = h('section.panel.term-panel', { 'aria-labelledby': 'term-h' },
    h('div.panel-head', h('h2', { id: 'term-h' }, 'Terminal'), termStatus, h('div.spacer'), ctrlC, reconnect),
    termBox)

  // --- tabs --------------------------------------------------------------------------------------------------
  const tl = timeline(id)
  const items = [{ id: 'timeline', label: 'Timeline', render: (p) => { p.append(tl.el); tl.refresh() } }]
  if (can.guest()) {
    items.push({ id: 'files', label: 'Files', render: (p) => filesTab(id, p) })
    items.push({ id: 'processes', label: 'Processes', render: (p) => processesTab(id, p) })
    items.push({ id: 'previews', label: 'Previews', render: (p) => portsTab(id, p, { mutate: can.mutate() }) })
  }
  items.push({ id: 'evidence', label: 'Evidence', render: (p) => evidenceTab(id, p, navigate) })
  items.push({ id: 'details', label: 'Details', render: (p) => { p.append(details); drawDetails() } })
  const details = h('div.details')
  const t = tabs(items, { label: 'Sandbox sections' })

  replace(main,
    h('nav.crumbs', { 'aria-label': 'Breadcrumb' }, h('ol', h('li', h('a', { href: '#/sandboxes' }, 'Sandboxes')), h('li', h('span', { 'aria-current': 'page' }, id)))),
    h('div.page-head', title, stateEl, h('div.spacer'), actions),
    facts,
    pendingNote,
    termPanel,
    t.el)

  // xterm.js is loaded with the first sandbox page (its own chunk), not with the sign-in form
  let term = null
  let gone = false
  import('../terminal.js').then(({ createTerminal }) => {
    if (gone) return
    term = createTerminal(termBox, id, {
      onStatus: (kind, text) => { termStatus.textContent = text; termStatus.className = 'term-status term-' + kind },
    })
    // clicked while xterm was still loading: the keyboard goes to it now
    if (document.activeElement === termBox) term.focus()
  }).catch((e) => { termStatus.textContent = 'The terminal could not be loaded: ' + errText(e) })
  reconnect.addEventListener('click', () => term && term.reconnect())
  ctrlC.addEventListener('click', () => term && term.interrupt())

  function drawHead() {
    if (!sb) return
    replace(stateEl, badge(sb.state), sb.pause_reason ? h('span.sub', ' ' + sb.pause_reason) : null)
    const seal = can.mutate() && ['running', 'paused', 'stopped'].includes(sb.state) ? h('button.btn.btn-small', { type: 'button' }, 'Seal evidence') : null
    if (seal) seal.addEventListener('click', async () => {
      seal.disabled = true
      try {
        const r = await api.post(`/v1/sandboxes/${enc(id)}/evidence`, {})
        toast('Sealed ' + r.id)
        navigate('#/evidence/' + enc(r.id))
      } catch (e) { toastError(e); seal.disabled = false }
    })
    replace(actions, seal, can.mutate() ? lifecycleButtons(sb, (what) => { if (what === 'Delete') navigate('#/sandboxes'); else load() }, { small: true }) : null)
    const m = latest
    replace(facts, dl([
      ['Template', sb.template],
      ['Tenant', sb.tenant],
      ['Resources', `${sb.vcpus} vCPU · ${mib(sb.memory_mib)}${sb.disk_gib ? ' · ' + sb.disk_gib + ' GiB disk' : ''}`],
      ['CPU', m && Number.isFinite(m.cpu_used_pct) ? pct(m.cpu_used_pct) : ''],
      ['Memory', m && m.mem_used_bytes !== undefined ? `${bytes(m.mem_used_bytes)} of ${bytes(m.mem_total_bytes)}` : ''],
      ['Age', h('span', { title: time(sb.created_at) }, age(sb.created_at))],
      ['Expires', sb.expires_at ? h('span', { title: time(sb.expires_at) }, until(sb.expires_at)) : 'never'],
      ['Node', sb.node],
      ['Task', sb.task && (sb.task.id || sb.task.prompt) ? [sb.task.id ? h('span.mono', sb.task.id + ' ') : null, sb.task.prompt ? h('span', sb.task.prompt.slice(0, 160)) : null] : ''],
    ], 'kv kv-inline'))
    if (sb.error) facts.append(h('p.error', sb.error))
  }

  function drawPending() {
    const mine = approvals.list.filter((a) => a.sandbox === id)
    replace(pendingNote, mine.length ? h('p.callout.callout-warn', `${mine.length} command${mine.length === 1 ? '' : 's'} of this sandbox wait${mine.length === 1 ? 's' : ''} for approval. `, h('a', { href: '#/approvals' }, 'Open the inbox')) : null)
  }

  function drawDetails() {
    if (!sb) return
    const list = (a) => (a && a.length ? a.join(', ') : '')
    replace(details, dl([
      ['ID', h('span.mono', sb.id)],
      ['State', sb.state],
      ['Created', time(sb.created_at)],
      ['Timeout', sb.timeout_s ? `${sb.timeout_s} s, then ${sb.on_timeout}` : 'none'],
      ['Auto resume', sb.auto_resume ? 'yes' : 'no'],
      ['Idle rule', sb.idle ? `${sb.idle.action} after ${sb.idle.after_s} s` : 'none'],
      ['Cloned from', sb.snapshot],
      ['Network allowlist', list(sb.network && sb.network.allow) || 'nothing (egress refused)'],
      ['Secrets (names)', list(sb.secrets)],
      ['Volumes', (sb.volumes || []).map((v) => `${v.name} at ${v.path}${v.read_only ? ' (ro)' : ''}`).join(', ')],
      ['Artifacts', list(sb.artifacts)],
      ['Task prompt', sb.task && sb.task.prompt ? h('pre.prompt', sb.task.prompt) : ''],
      ['Requested by', sb.task && sb.task.requested_by],
      ['Test commands', sb.task && list(sb.task.test_commands)],
      ['Sensitive paths', sb.task && list(sb.task.sensitive_paths)],
      ['Metadata', sb.metadata && Object.keys(sb.metadata).length ? Object.entries(sb.metadata).map(([k, v]) => `${k}=${v}`).join(', ') : ''],
      ['Packages', sb.packages ? `npm ${sb.packages.npm?.enabled ? 'on' : 'off'}, PyPI ${sb.packages.pypi?.enabled ? 'on' : 'off'}, apt ${sb.packages.apt?.mode || ''}${sb.packages.dry_run ? ' (dry run)' : ''}` : ''],
    ]))
  }

  async function load() {
    try {
      sb = await api.get(`/v1/sandboxes/${enc(id)}`)
      setTitle(id + ' · ' + sb.state)
      drawHead()
      drawDetails()
    } catch (e) {
      if (e.status === 404) {
        replace(stateEl, badge('gone', 'muted'))
        replace(facts, h('p.callout', 'This sandbox no longer exists (or belongs to another tenant). Its audit log and evidence may still be readable below.'))
        replace(actions)
      } else replace(facts, h('p.error', 'Could not load the sandbox: ' + errText(e)))
    }
  }
  async function loadMetrics() {
    if (!sb || sb.state !== 'running') return
    try {
      const r = await api.get(`/v1/sandboxes/${enc(id)}/metrics?since=${enc(new Date(Date.now() - 30000).toISOString())}`, { quiet401: true })
      const s = (r && r.samples) || []
      if (s.length) { latest = s[s.length - 1]; drawHead() }
    } catch {}
  }

  const refreshTl = debounce(() => tl.refresh(), 300)
  const refreshSb = debounce(load, 300)
  stops.push(events.on((e) => {
    if (e.sandbox && e.sandbox !== id) return
    if (String(e.type).startsWith('sandbox')) refreshSb()
    if (e.sandbox === id) refreshTl()
  }))
  stops.push(approvals.on(drawPending))
  stops.push(poll(() => { load(); tl.refresh() }, 10000))
  stops.push(poll(loadMetrics, 10000))
  load().then(loadMetrics)
  drawPending()
  return () => { gone = true; stops.forEach((s) => s()); refreshTl.cancel(); refreshSb.cancel(); t.destroy(); if (term) term.dispose() }
}

function evidenceTab(id, panel, navigate) {
  const table = dataTable([
    { label: 'Bundle', cell: (e) => h('a.mono', { href: '#/evidence/' + enc(e.id) }, e.id) },
    { label: 'Kind', cell: (e) => e.kind },
    { label: 'Sealed', cls: 'num', cell: (e) => h('span', { title: time(e.created_at) }, age(e.created_at) + ' ago') },
    { label: 'Tests', cell: (e) => badge((e.summary && e.summary.tests) || 'not_run') },
    { label: 'Findings', cls: 'num', cell: (e) => String(((e.summary && e.summary.findings) || []).length) },
    { label: 'Review', cell: (e) => (e.review ? badge(e.review.decision) : h('span.muted', 'none')) },
    { label: 'Size', cls: 'num', cell: (e) => bytes(e.size) },
  ], { key: (e) => e.id, caption: 'Evidence bundles', empty: 'No bundle yet. “Seal evidence” makes one.' })
  const note = h('p.status-line', { role: 'status' })
  async function refresh() {
    try {
      const r = await api.get(`/v1/sandboxes/${enc(id)}/evidence`)
      table.update(((r && r.evidence) || []).slice().reverse())
      note.textContent = ''
    } catch (e) { note.textContent = 'Could not list evidence: ' + errText(e) }
  }
  replace(panel, table.el, note)
  refresh()
  const off = events.on((e) => { if (e.sandbox === id && String(e.type).startsWith('evidence')) refresh() })
  return off
}
