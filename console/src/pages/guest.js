// The sandbox page's guest tabs: files (browse, download, upload), processes (with followed logs) and
// preview ports. All need an agent or admin role (an approver's calls are 403).
import { h, field, replace } from '../dom.js'
import { api, enc, errText, request } from '../api.js'
import { dataTable } from '../components/table.js'
import { badge } from '../components/badge.js'
import { toast, toastError } from '../components/toast.js'
import { confirmDialog } from '../components/dialog.js'
import { bytes, time, age } from '../format.js'

const base = (id) => `/v1/sandboxes/${enc(id)}`
const join = (dir, name) => (dir.endsWith('/') ? dir : dir + '/') + name
const parent = (p) => { const i = p.replace(/\/+$/, '').lastIndexOf('/'); return i <= 0 ? '/' : p.slice(0, i) }

export function filesTab(sandboxId, panel) {
  let cwd = '/home/user'
  const crumbs = h('nav.crumbs', { 'aria-label': 'Current directory' })
  const pathInput = h('input.mono', { type: 'text', name: 'path', value: cwd, autocomplete: 'off', spellcheck: 'false' })
  const go = h('form.inline-form', field('Path', pathInput), h('button.btn.btn-small', { type: 'submit' }, 'Open'))
  go.addEventListener('submit', (e) => { e.preventDefault(); open(pathInput.value.trim() || '/') })
  const upload = h('input', { type: 'file', name: 'upload', multiple: true })
  const upForm = h('form.inline-form', field('Upload to this directory', upload), h('button.btn.btn-small', { type: 'submit' }, 'Upload'))
  upForm.addEventListener('submit', async (e) => {
    e.preventDefault()
    const files = [...upload.files]
    if (!files.length) { toast('Choose a file first.', 'error'); return }
    for (const f of files) {
      try {
        await request('PUT', `${base(sandboxId)}/files?path=${enc(join(cwd, f.name))}`, { body: f, json: false, headers: { 'Content-Type': 'application/octet-stream' } })
        toast(`Uploaded ${f.name} (${bytes(f.size)})`)
      } catch (err) { toastError(err) }
    }
    upForm.reset()
    open(cwd)
  })
  const table = dataTable([
    { label: 'Name', cell: (e) => e.type === 'directory' ? h('button.linklike.mono', { type: 'button', 'data-path': e.path }, e.name + '/') : h('span.mono', e.name) },
    { label: 'Type', cell: (e) => e.type },
    { label: 'Size', cls: 'num', cell: (e) => (e.type === 'file' ? bytes(e.size) : '') },
    { label: 'Mode', cell: (e) => (e.mode ? h('span.mono', e.mode) : '') },
    { label: 'Modified', cls: 'num', cell: (e) => (e.mtime ? h('span', { title: time(e.mtime) }, age(e.mtime) + ' ago') : '') },
    { label: 'Actions', sr: true, cell: (e) => e.name === '..' ? '' : h('div.actions',
      e.type === 'file' ? h('a.btn.btn-small', { href: `${base(sandboxId)}/files?path=${enc(e.path)}`, download: e.name, 'aria-label': 'Download ' + e.name }, 'Download') : null,
      h('button.btn.btn-small.btn-danger-ghost', { type: 'button', 'data-delete': e.path, 'data-dir': e.type === 'directory' ? '1' : '', 'aria-label': 'Delete ' + e.name }, 'Delete')) },
  ], { key: (e) => e.path, caption: 'Directory entries', empty: 'An empty directory.' })
  table.tbody.addEventListener('click', async (e) => {
    const dir = e.target.closest('button[data-path]')
    if (dir) return open(dir.dataset.path)
    const del = e.target.closest('button[data-delete]')
    if (del) {
      const p = del.dataset.delete
      if (!(await confirmDialog(`Delete ${p}?`, del.dataset.dir ? 'The directory and everything in it are removed.' : '', { confirm: 'Delete', danger: true }))) return
      try { await api.del(`${base(sandboxId)}/files?path=${enc(p)}${del.dataset.dir ? '&recursive=1' : ''}`); toast('Deleted ' + p); open(cwd) } catch (err) { toastError(err) }
    }
  })
  const note = h('p.status-line', { role: 'status' })

  async function open(path) {
    try {
      const r = await api.get(`${base(sandboxId)}/fs?path=${enc(path)}`)
      if (r.type && r.type !== 'directory') {
        // a file: offer it
        note.textContent = ''
        replace(note, 'A file: ', h('a', { href: `${base(sandboxId)}/files?path=${enc(r.path)}`, download: r.name }, 'download ' + r.name), ` (${bytes(r.size)})`)
        return
      }
      cwd = r.path || path
      pathInput.value = cwd
      const entries = (r.entries || []).slice().sort((a, b) => (a.type === 'directory') === (b.type === 'directory') ? a.name.localeCompare(b.name) : a.type === 'directory' ? -1 : 1)
      if (cwd !== '/') entries.unshift({ name: '..', path: parent(cwd), type: 'directory', size: 0, mode: '', mtime: '' })
      table.update(entries)
      note.textContent = r.truncated ? 'Only the first 10000 entries are shown.' : ''
      drawCrumbs()
    } catch (e) { note.textContent = 'Could not list ' + path + ': ' + errText(e) }
  }
  function drawCrumbs() {
    const parts = cwd.split('/').filter(Boolean)
    const items = [h('li', h('button.linklike', { type: 'button', 'data-path': '/' }, '/'))]
    parts.forEach((p, i) => items.push(h('li', h('button.linklike', { type: 'button', 'data-path': '/' + parts.slice(0, i + 1).join('/'), 'aria-current': i === parts.length - 1 ? 'location' : null }, p))))
    replace(crumbs, h('ol', items))
  }
  crumbs.addEventListener('click', (e) => { const b = e.target.closest('button[data-path]'); if (b) open(b.dataset.path) })
  replace(panel, h('div.toolbar', go, upForm), crumbs, table.el, note)
  open(cwd)
  return null
}

export function processesTab(sandboxId, panel) {
  let follow = null
  const logs = h('pre.logs', { tabindex: '0', 'aria-label': 'Process output', 'aria-live': 'off' })
  const logsHead = h('h3', 'Output')
  const stopBtn = h('button.btn.btn-small', { type: 'button', hidden: true }, 'Stop following')
  stopBtn.addEventListener('click', () => stopFollow())
  const logBox = h('section.logbox', { hidden: true, 'aria-label': 'Process output' }, h('div.logbox-head', logsHead, stopBtn), logs)
  const table = dataTable([
    { label: 'PID', cls: 'num', cell: (p) => String(p.pid) },
    { label: 'Command', cell: (p) => h('code.cmd', (p.cmd || []).join(' ')) },
    { label: 'State', cell: (p) => [badge(p.state), p.exit_code !== undefined ? h('span.sub', 'exit ' + p.exit_code) : null, p.signal ? h('span.sub', 'signal ' + p.signal) : null] },
    { label: 'Started', cls: 'num', cell: (p) => h('span', { title: time(p.started_at) }, age(p.started_at) + ' ago') },
    { label: 'Output', cls: 'num', cell: (p) => bytes(p.output_bytes) },
    { label: 'Actions', sr: true, cell: (p) => h('div.actions',
      h('button.btn.btn-small', { type: 'button', 'data-logs': p.id, 'aria-label': `${p.state === 'running' ? 'Follow logs' : 'Logs'} of ${p.pid}` }, p.state === 'running' ? 'Follow logs' : 'Logs'),
      p.state === 'running' ? h('button.btn.btn-small.btn-danger-ghost', { type: 'button', 'data-term': p.id, 'aria-label': `Terminate ${p.pid}` }, 'Terminate') : null) },
  ], { key: (p) => p.id, caption: 'Background processes', empty: 'No background processes (POST /v1/sandboxes/{id}/processes starts one).' })
  table.tbody.addEventListener('click', async (e) => {
    const l = e.target.closest('button[data-logs]')
    if (l) return startFollow(l.dataset.logs)
    const t = e.target.closest('button[data-term]')
    if (t) {
      try { await api.post(`${base(sandboxId)}/processes/${enc(t.dataset.term)}/signal`, { signal: 'TERM' }); toast('Sent TERM to ' + t.dataset.term); refresh() } catch (err) { toastError(err) }
    }
  })
  const note = h('p.status-line', { role: 'status' })
  async function refresh() {
    try {
      const r = await api.get(`${base(sandboxId)}/processes`)
      table.update(((r && r.processes) || []).slice().sort((a, b) => b.pid - a.pid))
      note.textContent = ''
    } catch (e) { note.textContent = 'Could not list processes: ' + errText(e) }
  }
  function stopFollow() {
    if (follow) follow.abort()
    follow = null
    stopBtn.hidden = true
  }
  async function startFollow(pid) {
    stopFollow()
    const ctl = new AbortController()
    follow = ctl
    logs.textContent = ''
    logsHead.textContent = 'Output of ' + pid
    logBox.hidden = false
    stopBtn.hidden = false
    try {
      const res = await request('GET', `${base(sandboxId)}/processes/${enc(pid)}/logs?follow=1`, { signal: ctl.signal })
      const reader = res.body.getReader()
      const dec = new TextDecoder()
      for (;;) {
        const { value, done } = await reader.read()
        if (done) break
        const atBottom = logs.scrollTop + logs.clientHeight >= logs.scrollHeight - 8
        let t = logs.textContent + dec.decode(value, { stream: true })
        if (t.length > 400000) t = t.slice(-300000)
        logs.textContent = t
        if (atBottom) logs.scrollTop = logs.scrollHeight
      }
      logs.textContent += '\n[end of output]'
    } catch (e) {
      if (e.name !== 'AbortError') logs.textContent += '\n[' + errText(e) + ']'
    } finally { if (follow === ctl) { follow = null; stopBtn.hidden = true } }
  }
  const refreshBtn = h('button.btn.btn-small', { type: 'button' }, 'Refresh')
  refreshBtn.addEventListener('click', refresh)
  replace(panel, h('div.toolbar', h('div.spacer'), refreshBtn), table.el, note, logBox)
  refresh()
  const t = setInterval(() => { if (!document.hidden && panel.isConnected && !panel.hidden) refresh() }, 10000)
  return () => { clearInterval(t); stopFollow() }
}

export function portsTab(sandboxId, panel, { mutate }) {
  const table = dataTable([
    { label: 'Port', cls: 'num', cell: (p) => String(p.port) },
    { label: 'Preview', cell: (p) => h('a.mono', { href: p.url, target: '_blank', rel: 'noopener noreferrer' }, p.url) },
    { label: 'Opened', cls: 'num', cell: (p) => h('span', { title: time(p.created_at) }, age(p.created_at) + ' ago') },
    mutate ? { label: 'Actions', sr: true, cell: (p) => h('button.btn.btn-small.btn-danger-ghost', { type: 'button', 'data-close': String(p.port), 'aria-label': `Close port ${p.port}` }, 'Close') } : null,
  ].filter(Boolean), { key: (p) => String(p.port), caption: 'Preview ports', empty: 'No port is exposed.' })
  table.tbody.addEventListener('click', async (e) => {
    const b = e.target.closest('button[data-close]')
    if (!b) return
    try { await api.del(`${base(sandboxId)}/ports/${enc(b.dataset.close)}`); toast('Closed port ' + b.dataset.close); refresh() } catch (err) { toastError(err) }
  })
  const note = h('p.status-line', { role: 'status' })
  const port = h('input', { type: 'number', name: 'port', min: '1', max: '65535', required: true, placeholder: '3000' })
  const form = h('form.inline-form', field('Guest port', port), h('button.btn.btn-small', { type: 'submit' }, 'Expose'))
  form.addEventListener('submit', async (e) => {
    e.preventDefault()
    try { const p = await api.post(`${base(sandboxId)}/ports`, { port: Number(port.value) }); toast('Port ' + p.port + ' exposed'); form.reset(); refresh() } catch (err) { toastError(err) }
  })
  async function refresh() {
    try {
      const r = await api.get(`${base(sandboxId)}/ports`)
      table.update((r && r.ports) || [])
      note.textContent = ''
    } catch (e) { note.textContent = 'Could not list ports: ' + errText(e) }
  }
  replace(panel, mutate ? h('div.toolbar', form) : null, table.el, note)
  refresh()
  return null
}
