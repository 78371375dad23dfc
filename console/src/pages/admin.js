// #/admin (admin keys): tenants with quotas and usage, API keys (mint, revoke), templates, fleet nodes.
import { h, field, replace } from '../dom.js'
import { api, enc, errText } from '../api.js'
import { can } from '../store.js'
import { badge } from '../components/badge.js'
import { dataTable } from '../components/table.js'
import { toast, toastError } from '../components/toast.js'
import { confirmDialog } from '../components/dialog.js'
import { time, age, mib, short } from '../format.js'

const QUOTAS = [['sandboxes', 'Sandboxes'], ['vcpus', 'vCPUs'], ['memory_mib', 'Memory'], ['disk_gib', 'Disk GiB'], ['snapshots', 'Snapshots'], ['concurrent_execs', 'Execs'], ['volumes', 'Volumes']]

export function adminPage({ main, setTitle }) {
  setTitle('Admin')
  if (!can.admin()) {
    replace(main, h('div.page-head', h('h1', 'Admin')), h('p.callout', 'The admin page is for admin keys.'))
    return null
  }
  const section = (id, title, ...body) => h('section.section', { 'aria-labelledby': id }, h('h2', { id }, title), ...body)

  // --- tenants ---------------------------------------------------------------------------------------------
  const usageCell = (t, k) => {
    const used = t.usage ? t.usage[k] : undefined
    const q = t.quota ? t.quota[k] : undefined
    const fmt = (v) => (k === 'memory_mib' ? mib(v) : String(v))
    if (used === undefined && q === undefined) return '—'
    const over = q !== undefined && used !== undefined && used >= q
    return h('span' + (over ? '.over' : ''), `${used !== undefined ? fmt(used) : '?'} / ${q !== undefined ? fmt(q) : '∞'}`)
  }
  const tenants = dataTable([
    { label: 'Tenant', cell: (t) => h('strong', t.name) },
    ...QUOTAS.map(([k, label]) => ({ label, cls: 'num', cell: (t) => usageCell(t, k) })),
    { label: 'Policy', cell: (t) => (t.policy ? `${(t.policy.deny || []).length} deny · ${(t.policy.approve || []).length} approve · ${(t.policy.allow || []).length} allow` : '—') },
    { label: 'Egress', cell: (t) => (t.network && t.network.allow ? (t.network.allow.length ? t.network.allow.slice(0, 3).join(', ') + (t.network.allow.length > 3 ? '…' : '') : 'none') : 'not set') },
    { label: 'Updated', cls: 'num', cell: (t) => (t.updated_at ? time(t.updated_at) : 'keys only') },
  ], { key: (t) => t.name, caption: 'Tenants: usage / quota', empty: 'No tenant has settings or keys.' })
  const tenantNote = h('p.status-line')

  // --- keys ----------------------------------------------------------------------------------------------------
  const keys = dataTable([
    { label: 'Name', cell: (k) => k.name || '—' },
    { label: 'Key id', cell: (k) => h('span.mono', k.id) },
    { label: 'Tenant', cell: (k) => k.tenant },
    { label: 'Role', cell: (k) => badge(k.role, k.role === 'admin' ? 'bad' : k.role === 'approver' ? 'warn' : 'info') },
    { label: 'Created', cls: 'num', cell: (k) => h('span', { title: time(k.created_at) }, age(k.created_at) + ' ago') },
    { label: 'Expires', cls: 'num', cell: (k) => (k.expires_at ? time(k.expires_at) : 'never') },
    { label: 'Actions', sr: true, cell: (k) => h('button.btn.btn-small.btn-danger-ghost', { type: 'button', 'data-revoke': k.id, 'data-name': k.name || k.id, 'aria-label': `Revoke ${k.name || k.id}` }, 'Revoke') },
  ], { key: (k) => k.id, caption: 'API keys', empty: 'No keys.' })
  keys.tbody.addEventListener('click', async (e) => {
    const b = e.target.closest('button[data-revoke]')
    if (!b) return
    if (!(await confirmDialog(`Revoke ${b.dataset.name}?`, 'The next request or session using it gets 401.', { confirm: 'Revoke key', danger: true }))) return
    try { await api.del(`/v1/keys/${enc(b.dataset.revoke)}`); toast('Revoked ' + b.dataset.name); loadKeys() } catch (err) { toastError(err) }
  })
  const keyNote = h('p.status-line')
  const minted = h('div', { 'aria-live': 'polite' })
  const kTenant = h('input', { type: 'text', name: 'tenant', required: true, autocomplete: 'off', placeholder: 'acme' })
  const kRole = h('select', { name: 'role' }, ['agent', 'approver', 'admin'].map((r) => h('option', { value: r }, r)))
  const kName = h('input', { type: 'text', name: 'name', autocomplete: 'off', placeholder: 'ci-bot' })
  const kExp = h('input', { type: 'datetime-local', name: 'expires' })
  const mint = h('form.inline-form.mint-form', field('Tenant', kTenant), field('Role', kRole), field('Name', kName), field('Expires (optional)', kExp), h('button.btn.btn-primary', { type: 'submit' }, 'Mint key'))
  mint.addEventListener('submit', async (e) => {
    e.preventDefault()
    const body = { tenant: kTenant.value.trim(), role: kRole.value, name: kName.value.trim() }
    if (kExp.value) body.expires_at = new Date(kExp.value).toISOString()
    try {
      const k = await api.post('/v1/keys', body)
      const keyText = h('code.secret', k.key)
      const copy = h('button.btn.btn-small', { type: 'button' }, 'Copy')
      copy.addEventListener('click', async () => {
        try { await navigator.clipboard.writeText(k.key); toast('Copied') } catch {
          const r = document.createRange(); r.selectNodeContents(keyText); const s = getSelection(); s.removeAllRanges(); s.addRange(r); toast('Selected: copy it with Ctrl-C')
        }
      })
      const dismiss = h('button.btn.btn-small', { type: 'button' }, 'Done')
      dismiss.addEventListener('click', () => replace(minted))
      replace(minted, h('div.callout.callout-ok', { role: 'alert' },
        h('p', h('strong', `Key for ${k.name || k.id} (${k.role}, tenant ${k.tenant})`), ': shown this once, only its hash is kept.'),
        h('p', keyText, ' ', copy, ' ', dismiss)))
      mint.reset()
      loadKeys()
    } catch (err) { toastError(err) }
  })

  // --- templates and nodes -------------------------------------------------------------------------------------
  const templates = dataTable([
    { label: 'Name', cell: (t) => h('strong', t.name + (t.kind === 'built' && t.tag ? ':' + t.tag : '')) },
    { label: 'Kind', cell: (t) => t.kind || 'base' },
    { label: 'Resources', cell: (t) => `${t.vcpus} vCPU · ${mib(t.memory_mib)}` },
    { label: 'Disk', cell: (t) => (t.has_disk ? 'yes' : 'no') },
    { label: 'Warm', cell: (t) => (t.warm ? badge('warm', 'ok') : 'no') },
    { label: 'Kernel', cell: (t) => t.kernel_version || '—' },
    { label: 'Digest', cell: (t) => h('code.hash', { title: t.digest }, short(t.digest, 16)) },
    { label: 'Built', cls: 'num', cell: (t) => (t.created_at ? time(t.created_at) : '—') },
  ], { key: (t) => t.name + ':' + (t.tag || ''), caption: 'Templates', empty: 'No templates.' })
  const nodes = dataTable([
    { label: 'Node', cell: (n) => [h('strong', n.name), n.self ? h('span.sub', ' (this one)') : null] },
    { label: 'Health', cell: (n) => badge(n.health) },
    { label: 'Sandboxes', cls: 'num', cell: (n) => String(n.sandboxes) },
    { label: 'Free vCPU', cls: 'num', cell: (n) => (n.capacity ? `${n.capacity.free_vcpus} / ${n.capacity.vcpus}` : '—') },
    { label: 'Free memory', cls: 'num', cell: (n) => (n.capacity ? `${mib(n.capacity.free_memory_mib)} / ${mib(n.capacity.memory_mib)}` : '—') },
    { label: 'Version', cell: (n) => n.version || '—' },
    { label: 'URL', cell: (n) => h('span.mono', n.url) },
  ], { key: (n) => n.name, caption: 'Nodes', empty: 'No nodes.' })
  const nodesSection = section('nodes-h', 'Nodes', nodes.el)
  nodesSection.hidden = true

  replace(main,
    h('div.page-head', h('h1', 'Admin')),
    section('tenants-h', 'Tenants', h('p.muted', 'Usage / quota per tenant (∞: no quota).'), tenants.el, tenantNote),
    section('keys-h', 'API keys', mint, minted, keys.el, keyNote),
    section('templates-h', 'Templates', templates.el),
    nodesSection)

  async function loadTenants() {
    try { tenants.update(((await api.get('/v1/tenants')) || {}).tenants || []); tenantNote.textContent = '' } catch (e) { tenantNote.textContent = errText(e) }
  }
  async function loadKeys() {
    try { keys.update(((await api.get('/v1/keys')) || {}).keys || []); keyNote.textContent = '' } catch (e) { keyNote.textContent = errText(e) }
  }
  async function loadTemplates() {
    try { templates.update(((await api.get('/v1/templates')) || {}).templates || []) } catch {}
  }
  async function loadNodes() {
    try {
      const r = await api.get('/v1/nodes', { quiet401: true })
      if (r && r.cluster) { nodes.update(r.nodes || []); nodesSection.hidden = false }
    } catch { nodesSection.hidden = true }
  }
  loadTenants(); loadKeys(); loadTemplates(); loadNodes()
  const t = setInterval(() => { if (!document.hidden) { loadTenants(); loadNodes() } }, 15000)
  return () => clearInterval(t)
}
