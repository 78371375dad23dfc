// Accessible tabs (WAI-ARIA tabs pattern): arrow keys move between tabs, each panel is labelled by its tab.
import { h, nextId } from '../dom.js'

// items: [{id, label, render(panel) -> optional cleanup fn}]; panels are rendered when first shown.
export function tabs(items, { label = 'Sections', initial, onChange } = {}) {
  const base = nextId('tab')
  const list = h('div.tablist', { role: 'tablist', 'aria-label': label })
  const panels = h('div.tabpanels')
  const state = items.map((it, i) => {
    const tab = h('button.tab', { type: 'button', role: 'tab', id: `${base}-${i}`, 'aria-controls': `${base}-p${i}`, 'aria-selected': 'false', tabindex: '-1' }, it.label)
    const panel = h('div.tabpanel', { role: 'tabpanel', id: `${base}-p${i}`, 'aria-labelledby': `${base}-${i}`, tabindex: '0', hidden: true })
    list.append(tab)
    panels.append(panel)
    return { ...it, tab, panel, rendered: false, cleanup: null }
  })
  let current = -1
  function select(i, focus) {
    if (i === current) return
    state.forEach((s, j) => {
      const on = i === j
      s.tab.setAttribute('aria-selected', String(on))
      s.tab.tabIndex = on ? 0 : -1
      s.panel.hidden = !on
    })
    current = i
    const s = state[i]
    if (!s.rendered) { s.rendered = true; s.cleanup = s.render(s.panel) || null }
    if (focus) s.tab.focus()
    if (onChange) onChange(s.id)
  }
  state.forEach((s, i) => {
    s.tab.addEventListener('click', () => select(i, false))
    s.tab.addEventListener('keydown', (e) => {
      let j = null
      if (e.key === 'ArrowRight') j = (i + 1) % state.length
      else if (e.key === 'ArrowLeft') j = (i - 1 + state.length) % state.length
      else if (e.key === 'Home') j = 0
      else if (e.key === 'End') j = state.length - 1
      if (j !== null) { e.preventDefault(); select(j, true) }
    })
  })
  const start = Math.max(0, state.findIndex((s) => s.id === initial))
  select(start, false)
  return {
    el: h('div.tabs', list, panels),
    select: (id) => { const i = state.findIndex((s) => s.id === id); if (i >= 0) select(i, false) },
    destroy: () => state.forEach((s) => { if (s.cleanup) s.cleanup() }),
  }
}
