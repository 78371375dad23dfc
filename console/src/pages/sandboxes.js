// #/sandboxes: the live list (state, template, tenant, age, CPU and memory, pending approvals), filters,
// create, lifecycle buttons, and the snapshots to clone from.
import { h, field, replace } from '../dom.js'
import { api, enc, errText } from '../api.js'
import { events, debounce, poll } from '../events.js'
import { session, can, approvals } from '../store.js'
import { dataTable } from '../components/table.js'
import { badge } from '../components/badge.js'
import { toast, toastError } from '../components/toast.js'
import { lifecycle, lifecycleButtons } from '../lifecycle.js'
import { age, bytes, mib, pct, until, time } from '../format.js'

const STATES = ['running', 'creating', 'paused', 'hibernated', 'stopped', 'error', 'deleting', 'unavailable']
const METRICS_MAX = 24 // running sandboxes sampled per refresh

export function sandboxesPage({ main, setTitle }) {
  setTitle('Sandboxes')
  let list = []
  let loadedOnce = false
  const metrics = new Map() // id -> latest sample
  const stops = []

  // --- filters --------------------------------------------------------------------------------------
  const stateSel = h('select', { name: 'state' }, h('option', { value: '' }, 'Any state'), STATES.map((s) => h('option', { value: s }, s)))
  const text = h('input', { type: 'search', name: 'q', placeholder: 'id, template, tenant, metadata…', autocomplete: 'off' })
  stateSel.addEventListener('change', () => draw())
  text.addEventListener('input', () => draw())
  const count = h('span.muted')
  const filters = h('div.toolbar', { role: 'search', 'aria-label': 'Filter sandboxes' },
    field('State', stateSel), field('Search', text), h('div.spacer'), count)

  // --- the table ------------------------------------------------------------------------------------
  const showTenant = true
  const cols = [
    { label: 'Sandbox', cell: (s) => [h('a.mono', { href: '#/sandboxes/' + enc(s.id) }, s.id), meta(s)] },
    { label: 'State', cell: (s) => [badge(s.state), s.pause_reason ? h('span.sub', s.pause_reason) : null, s.error ? h('span.sub.error-text', s.error) : null] },
    { label: 'Template', cell: (s) => s.template || '—' },
    showTenant ? { label: 'Tenant', cell: (s) => s.tenant || (session.current.tenant !== '*' ? session.current.tenant : '—') } : null,
    { label: 'Age', cls: 'num', cell: (s) => h('span', { title: time(s.created_at) }, age(s.created_at)) },
    { label: 'CPU', cls: 'num', cell: (s) => cpuCell(s) },
    { label: 'Memory', cls: 'num', cell: (s) => memCell(s) },
    { label: 'Expires', cls: 'num', cell: (s) => (s.expires_at ? h('span', { title: time(s.expires_at) }, until(s.expires_at)) : 'never') },
    can.decide() ? { label: 'Pending', cls: 'num', cell: (s) => pendingCell(s) } : null,
    can.mutate() ? { label: 'Actions', sr: true, cell: (s) => lifecycleButtons(s, refresh) } : null,
  ].filter(Boolean)
  const table = dataTable(cols, {
    key: (s) => s.id,
    caption: 'Sandboxes',
    attrs: { 'data-testid': 'sandbox-list' },
    rowAttrs: (s) => ({ 'data-testid': 'sandbox-row', 'data-sandbox-id': s.id, class: 'row-link' }),
    sig: (s) => JSON.stringify([s, metrics.get(s.id) || null, pendingBy().get(s.id) || 0, Math.floor(Date.now() / 60000)]),
    empty: 'No sandboxes.',
  })
  // a click anywhere on a row (not on a control) opens it
  table.tbody.addEventListener('click', (e) => {
    if (e.target.closest('a, button, input, select, textarea')) return
    const tr = e.target.closest('tr[data-sandbox-id]')
    if (tr) location.hash = '#/sandboxes/' + enc(tr.dataset.sandboxId)
  })
  const status = h('p.status-line', { role: 'status' })

  function meta(s) {
    const m = s.metadata && typeof s.metadata === 'object' ? Object.entries(s.metadata) : []
    const bits = m.slice(0, 3).map(([k, v]) => `${k}=${v}`)
    if (s.task && s.task.id) bits.unshift('task ' + s.task.id)
    if (s.node) bits.push('node ' + s.node)
    return bits.length ? h('span.sub', bits.join(' · ')) : null
  }
  function cpuCell(s) {
    const m = metrics.get(s.id)
    const alloc = s.vcpus ? `${s.vcpus} vCPU` : ''
    if (m && Number.isFinite(m.cpu_used_pct)) return [h('span', pct(m.cpu_used_pct)), h('span.sub', alloc)]
    return alloc || '—'
  }
  function memCell(s) {
    const m = metrics.get(s.id)
    if (m && m.mem_used_bytes !== undefined) return [h('span', bytes(m.mem_used_bytes)), h('span.sub', 'of ' + (m.mem_total_bytes ? bytes(m.mem_total_bytes) : mib(s.memory_mib)))]
    return s.memory_mib ? mib(s.memory_mib) : '—'
  }
  let pendingCache = null
  function pendingBy() {
    if (pendingCache) return pendingCache
    pendingCache = new Map()
    for (const a of approvals.list) pendingCache.set(a.sandbox, (pendingCache.get(a.sandbox) || 0) + 1)
    return pendingCache
  }
  function pendingCell(s) {
    if (!can.decide()) return '—'
    const n = pendingBy().get(s.id) || 0
    return n ? h('a.badge.badge-warn', { href: '#/approvals', 'aria-label': `${n} pending approval${n === 1 ? '' : 's'} for ${s.id}` }, String(n)) : h('span.muted', '0')
  }

  function draw() {
    pendingCache = null
    const st = stateSel.value
    const q = text.value.trim().toLowerCase()
    const shown = list.filter((s) => (!st || s.state === st) && (!q || JSON.stringify([s.id, s.template, s.tenant, s.metadata, s.task && s.task.id, s.node]).toLowerCase().includes(q)))
    table.update(shown)
    count.textContent = shown.length === list.length ? `${list.length} sandbox${list.length === 1 ? '' : 'es'}` : `${shown.length} of ${list.length}`
  }

  async function refresh() {
    try {
      const r = await api.get('/v1/sandboxes')
      list = ((r && r.sandboxes) || []).slice().sort((a, b) => String(b.created_at || '').localeCompare(String(a.created_at || '')))
      loadedOnce = true
      status.textContent = ''
      draw()
      if (snapshots) snapshots.refresh()
    } catch (e) {
      status.textContent = 'Could not load sandboxes: ' + errText(e)
      status.className = 'status-line error'
    }
  }

  async function refreshMetrics() {
    const running = list.filter((s) => s.state === 'running').slice(0, METRICS_MAX)
    const since = new Date(Date.now() - 30000).toISOString()
    // a few at a time: the first call for a sandbox samples it (250 ms), and the tenant's requests in flight are bounded
    const queue = running.slice()
    await Promise.all([0, 1, 2, 3].map(async () => {
      for (let s = queue.shift(); s; s = queue.shift()) {
        try {
          const r = await api.get(`/v1/sandboxes/${enc(s.id)}/metrics?since=${enc(since)}`, { quiet401: true })
          const samples = (r && r.samples) || []
          if (samples.length) metrics.set(s.id, samples[samples.length - 1])
        } catch { /* metrics are a nicety */ }
      }
    }))
    for (const id of metrics.keys()) if (!list.some((s) => s.id === id && s.state === 'running')) metrics.delete(id)
    draw()
  }

  // --- create -------------------------------------------------------------------------------------------
  let createPanel = null
  if (can.mutate()) createPanel = createForm(refresh)

  // --- snapshots ------------------------------------------------------------------------------------------
  const snapshots = snapshotsSection(refresh)

  const newBtn = createPanel ? h('button.btn.btn-primary', { type: 'button', 'aria-expanded': 'false', 'aria-controls': 'create-sandbox' }, 'New sandbox') : null
  if (newBtn) {
    newBtn.addEventListener('click', () => {
      const open = createPanel.hidden
      createPanel.hidden = !open
      newBtn.setAttribute('aria-expanded', String(open))
      if (open) createPanel.querySelector('select, input').focus()
    })
  }

  replace(main,
    h('div.page-head', h('h1', 'Sandboxes'), h('div.spacer'), newBtn),
    createPanel,
    filters,
    table.el,
    status,
    snapshots.el)

  const later = debounce(refresh, 300)
  stops.push(events.on((e) => { if (String(e.type).startsWith('sandbox') || e.type === 'snapshot.created') later() }))
  stops.push(approvals.on(() => draw()))
  stops.push(poll(refresh, 10000))
  stops.push(poll(refreshMetrics, 10000))
  refresh().then(() => refreshMetrics())
  return () => { stops.forEach((s) => s()); later.cancel() }
}

function createForm(onCreated) {
  const tmpl = h('select', { name: 'template', required: true }, h('option', { value: 'minimal' }, 'minimal'))
  api.get('/v1/templates').then((r) => {
    const ts = (r && r.templates) || []
    if (!ts.length) return
    replace(tmpl, ts.map((t) => {
      const name = t.kind === 'built' && t.tag ? `${t.name}:${t.tag}` : t.name
      return h('option', { value: name, selected: name === 'minimal' }, `${name} — ${t.vcpus} vCPU, ${mib(t.memory_mib)}${t.warm ? ', warm' : ''}`)
    }))
  }).catch(() => {})
  const repo = h('input', { type: 'url', name: 'repo', placeholder: 'https://git.example/org/app.git', autocomplete: 'off' })
  const branch = h('input', { type: 'text', name: 'branch', placeholder: 'agent/task-1', autocomplete: 'off' })
  const ref = h('input', { type: 'text', name: 'ref', placeholder: 'main', autocomplete: 'off' })
  const policy = h('textarea.mono', { name: 'policy', rows: 3, placeholder: '{"approve": ["git push*"], "deny": ["rm -rf /*"]}' })
  const timeout = h('input', { type: 'number', name: 'timeout', min: '0', placeholder: 'server default', inputmode: 'numeric' })
  const error = h('p.error', { role: 'alert' })
  const submit = h('button.btn.btn-primary', { type: 'submit' }, 'Create sandbox')
  const form = h('form.create-form',
    h('div.grid-3',
      field('Template', tmpl),
      field('Repository (optional)', repo, 'Checked out on the host, written into the guest at /workspace.'),
      field('Task branch', branch, 'Required with a repository.'),
      field('Base ref', ref, 'Branch, tag or revision (default HEAD).'),
      field('Timeout (seconds)', timeout, '0 = none.')),
    field('Command policy (JSON)', policy, 'deny > approve > allow: command-prefix globs. Empty = the tenant\'s defaults.'),
    h('div.form-actions', submit, error))
  form.addEventListener('submit', async (e) => {
    e.preventDefault()
    error.textContent = ''
    const body = { template: tmpl.value }
    if (policy.value.trim()) {
      try { body.policy = JSON.parse(policy.value) } catch (err) { error.textContent = 'The policy is not valid JSON: ' + err.message; policy.focus(); return }
    }
    if (repo.value.trim()) {
      if (!branch.value.trim()) { error.textContent = 'A repository needs a task branch.'; branch.focus(); return }
      body.workspace = { repo: repo.value.trim(), branch: branch.value.trim() }
      if (ref.value.trim()) body.workspace.ref = ref.value.trim()
    }
    if (timeout.value !== '') body.timeout_s = Number(timeout.value)
    submit.disabled = true
    submit.textContent = 'Creating…'
    try {
      const s = await api.post('/v1/sandboxes', body)
      toast(`Created ${s.id}`)
      form.reset()
      onCreated()
    } catch (err) {
      error.textContent = errText(err)
    } finally {
      submit.disabled = false
      submit.textContent = 'Create sandbox'
    }
  })
  return h('section.panel', { id: 'create-sandbox', hidden: true, 'aria-labelledby': 'create-h' }, h('h2', { id: 'create-h' }, 'New sandbox'), form)
}

function snapshotsSection(onChange) {
  const cols = [
    { label: 'Snapshot', cell: (s) => h('span.mono', s.id) },
    { label: 'State', cell: (s) => badge(s.state) },
    { label: 'From sandbox', cell: (s) => (s.source_sandbox ? h('a.mono', { href: '#/sandboxes/' + enc(s.source_sandbox) }, s.source_sandbox) : '—') },
    { label: 'Template', cell: (s) => s.template },
    { label: 'Size', cls: 'num', cell: (s) => bytes(s.size_bytes) },
    { label: 'Taken', cls: 'num', cell: (s) => h('span', { title: time(s.created_at) }, age(s.created_at) + ' ago') },
    can.mutate() ? {
      label: 'Actions', sr: true, cell: (s) => h('div.actions',
        btn('Clone', `Clone snapshot ${s.id}`, async () => { if (await lifecycle.clone(s.id)) onChange() }, s.state !== 'ready'),
        btn('Delete', `Delete snapshot ${s.id}`, async () => { if (await lifecycle.deleteSnapshot(s.id)) refresh() }, false, '.btn-danger-ghost')),
    } : null,
  ].filter(Boolean)
  const table = dataTable(cols, { key: (s) => s.id, caption: 'Snapshots', empty: 'No snapshots. Take one with a sandbox\'s Snapshot button; clone it here.' })
  const note = h('p.status-line')
  let pending = false
  async function refresh() {
    if (pending) return
    pending = true
    try {
      const r = await api.get('/v1/snapshots')
      table.update(((r && r.snapshots) || []).filter((s) => s.state !== 'deleted').sort((a, b) => String(b.created_at).localeCompare(String(a.created_at))))
      note.textContent = ''
    } catch (e) { note.textContent = 'Could not load snapshots: ' + errText(e) } finally { pending = false }
  }
  const el = h('section.section', { 'aria-labelledby': 'snap-h' }, h('h2', { id: 'snap-h' }, 'Snapshots'), table.el, note)
  return { el, refresh }
}

function btn(label, aria, fn, disabled, extra = '') {
  const b = h('button.btn.btn-small' + extra, { type: 'button', 'aria-label': aria, disabled }, label)
  b.addEventListener('click', async () => { b.disabled = true; try { await fn() } catch (e) { toastError(e) } finally { if (b.isConnected) b.disabled = false } })
  return b
}
