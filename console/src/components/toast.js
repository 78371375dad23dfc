// Transient messages in a live region (errors stay until dismissed).
import { h } from '../dom.js'

let region = null
function ensure() {
  if (region && region.isConnected) return region
  region = h('div.toasts', { role: 'status', 'aria-live': 'polite' })
  document.body.append(region)
  return region
}

export function toast(message, kind = 'info', ms = kind === 'error' ? 12000 : 4000) {
  const r = ensure()
  const close = h('button.toast-close', { type: 'button', 'aria-label': 'Dismiss message' }, '×')
  const el = h('div.toast.toast-' + kind, h('span.toast-text', message), close)
  const remove = () => el.remove()
  close.addEventListener('click', remove)
  r.append(el)
  while (r.children.length > 5) r.firstChild.remove()
  if (ms) setTimeout(remove, ms)
  return remove
}
export const toastError = (e) => toast(e && e.message ? e.message : String(e), 'error')
