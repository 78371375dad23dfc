// Modal dialogs on <dialog>: confirm, and a small form. Both resolve on close (Escape = cancel).
import { h, field } from '../dom.js'

function open(dlg, onClose) {
  document.body.append(dlg)
  const previous = document.activeElement
  dlg.addEventListener('close', () => {
    dlg.remove()
    if (previous && previous.isConnected && typeof previous.focus === 'function') previous.focus()
    onClose(dlg.returnValue)
  })
  dlg.showModal()
}

export function confirmDialog(title, message, { confirm = 'Confirm', danger = false } = {}) {
  return new Promise((resolve) => {
    const titleId = 'dlg-t-' + Math.random().toString(36).slice(2)
    const ok = h('button.btn' + (danger ? '.btn-danger' : '.btn-primary'), { type: 'submit', value: 'ok' }, confirm)
    const dlg = h('dialog.dialog', { 'aria-labelledby': titleId },
      h('form', { method: 'dialog' },
        h('h2', { id: titleId }, title),
        message ? h('p', message) : null,
        h('div.dialog-actions', h('button.btn', { type: 'submit', value: 'cancel' }, 'Cancel'), ok)))
    open(dlg, (v) => resolve(v === 'ok'))
    ok.focus()
  })
}

// fields: [{name, label, type?, value?, hint?, options?: [[value,label]], required?, min?}] -> values or null
export function formDialog(title, fields, { submit = 'OK', intro } = {}) {
  return new Promise((resolve) => {
    const titleId = 'dlg-t-' + Math.random().toString(36).slice(2)
    const controls = {}
    const rows = fields.map((f) => {
      let c
      if (f.options) c = h('select', { name: f.name }, f.options.map(([v, l]) => h('option', { value: v, selected: v === f.value }, l)))
      else if (f.type === 'textarea') c = h('textarea', { name: f.name, rows: 4, value: f.value ?? '' })
      else c = h('input', { name: f.name, type: f.type || 'text', value: f.value ?? '', required: f.required, min: f.min, autocomplete: 'off' })
      controls[f.name] = c
      return field(f.label, c, f.hint)
    })
    let result = null
    const form = h('form', { method: 'dialog' },
      h('h2', { id: titleId }, title),
      intro ? h('p', intro) : null,
      rows,
      h('div.dialog-actions', h('button.btn', { type: 'button', onclick: () => dlg.close('cancel') }, 'Cancel'),
        h('button.btn.btn-primary', { type: 'submit', value: 'ok' }, submit)))
    form.addEventListener('submit', () => {
      result = {}
      for (const [k, c] of Object.entries(controls)) result[k] = c.value
    })
    const dlg = h('dialog.dialog', { 'aria-labelledby': titleId }, form)
    open(dlg, (v) => resolve(v === 'ok' ? result : null))
    const first = Object.values(controls)[0]
    if (first) first.focus()
  })
}
