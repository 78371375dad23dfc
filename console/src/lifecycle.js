// Sandbox lifecycle actions shared by the list and the sandbox page. Each returns true when it changed
// something (the caller refetches); errors are shown as toasts.
import { h } from './dom.js'
import { api, enc } from './api.js'
import { toast, toastError } from './components/toast.js'
import { confirmDialog, formDialog } from './components/dialog.js'

const path = (id, rest = '') => `/v1/sandboxes/${enc(id)}${rest}`

async function run(label, fn) {
  try {
    const r = await fn()
    if (r !== false) toast(label)
    return r !== false
  } catch (e) { toastError(e); return false }
}

export const lifecycle = {
  pause: (id) => run(`Paused ${id}`, () => api.post(path(id, '/pause'), {})),
  hibernate: (id) => run(`Hibernated ${id}`, () => api.post(path(id, '/pause'), { hibernate: true })),
  resume: (id) => run(`Resumed ${id}`, () => api.post(path(id, '/resume'), {})),
  async snapshot(id) {
    try {
      const s = await api.post(path(id, '/snapshots'), {})
      toast(`Snapshot ${s && s.id ? s.id : ''} taken of ${id}`)
      return true
    } catch (e) { toastError(e); return false }
  },
  async extend(id) {
    const v = await formDialog(`Timeout of ${id}`, [
      { name: 'minutes', label: 'Minutes from now (0 = no timeout)', type: 'number', value: '60', min: '0', required: true },
    ], { submit: 'Set timeout' })
    if (!v) return false
    const minutes = Number(v.minutes)
    if (!Number.isFinite(minutes) || minutes < 0) { toast('Give a number of minutes (0 or more).', 'error'); return false }
    return run(minutes ? `${id} now expires in ${minutes} min` : `${id} has no timeout now`,
      () => api.post(path(id, '/timeout'), { timeout_s: Math.round(minutes * 60) }))
  },
  async remove(id) {
    const ok = await confirmDialog(`Delete ${id}?`, 'The VM and every file in it are removed. A sandbox with a task or workspace is sealed into a final evidence bundle first.', { confirm: 'Delete sandbox', danger: true })
    if (!ok) return false
    return run(`Deleted ${id}`, () => api.del(path(id)))
  },
  async clone(snapshotId) {
    try {
      const s = await api.post('/v1/sandboxes', { snapshot: snapshotId })
      toast(`Cloned ${snapshotId} into ${s.id}`)
      return s
    } catch (e) { toastError(e); return null }
  },
  async deleteSnapshot(id) {
    const ok = await confirmDialog(`Delete snapshot ${id}?`, 'Clones already made from it keep working.', { confirm: 'Delete snapshot', danger: true })
    if (!ok) return false
    return run(`Deleted snapshot ${id}`, () => api.del(`/v1/snapshots/${enc(id)}`))
  },
}

// The buttons a sandbox in `state` offers; after(action) runs once an action changed something.
export function lifecycleButtons(sb, after, { small = true, withDelete = true } = {}) {
  const cls = 'button.btn' + (small ? '.btn-small' : '')
  const b = (label, fn, extra = '') => {
    const el = h(cls + extra, { type: 'button', 'aria-label': `${label} ${sb.id}` }, label)
    el.addEventListener('click', async () => {
      el.disabled = true
      try { const changed = await fn(sb.id); if (changed) after && after(label) } finally { if (el.isConnected) el.disabled = false }
    })
    return el
  }
  const out = []
  const st = sb.state
  if (st === 'running') out.push(b('Pause', lifecycle.pause))
  if (st === 'paused' || st === 'hibernated') out.push(b('Resume', lifecycle.resume))
  if (st === 'running' || st === 'paused') out.push(b('Snapshot', lifecycle.snapshot))
  if (['running', 'paused', 'hibernated'].includes(st)) out.push(b('Timeout', lifecycle.extend))
  if (withDelete && st !== 'deleting' && st !== 'unavailable') out.push(b('Delete', lifecycle.remove, '.btn-danger-ghost'))
  return h('div.actions', out)
}
