// A data table whose rows are keyed: update() rebuilds only the rows whose data changed and keeps the
// others (and the focus inside them) in place, so a live list can refresh every few seconds.
import { h, clear } from '../dom.js'

// columns: [{label, cell(row) -> Node|string, cls?, sr?: true (label only for screen readers)}]
// opts: {key(row), rowAttrs(row), caption, empty, sig(row)}
export function dataTable(columns, opts = {}) {
  const thead = h('thead', h('tr', columns.map((c) => h('th' + (c.cls ? '.' + c.cls : ''), { scope: 'col' }, c.sr ? h('span.sr-only', c.label) : c.label))))
  const tbody = h('tbody')
  const table = h('table.table' + (opts.cls ? '.' + opts.cls : ''), opts.attrs || null, opts.caption ? h('caption.sr-only', opts.caption) : null, thead, tbody)
  const rows = new Map() // key -> {tr, sig}
  const emptyRow = h('tr.empty', h('td', { colspan: columns.length }, opts.empty || 'Nothing here.'))
  const sig = opts.sig || ((r) => JSON.stringify(r))

  function build(r) {
    const attrs = opts.rowAttrs ? opts.rowAttrs(r) : null
    return h('tr', attrs, columns.map((c) => {
      const v = c.cell(r)
      return h('td' + (c.cls ? '.' + c.cls : ''), v instanceof Node || Array.isArray(v) ? v : v === undefined || v === null || v === '' ? '—' : String(v))
    }))
  }

  function update(list, extra = '') {
    const seen = new Set()
    let prev = null
    if (!list.length) {
      clear(tbody)
      rows.clear()
      tbody.append(emptyRow)
      return
    }
    if (emptyRow.parentNode) emptyRow.remove()
    for (const r of list) {
      const k = opts.key ? opts.key(r) : JSON.stringify(r)
      seen.add(k)
      const s = sig(r) + extra
      let e = rows.get(k)
      if (!e || e.sig !== s) {
        const tr = build(r)
        if (e) {
          // keep the keyboard where it was: the same control of the rebuilt row
          const sel = 'a, button, input, select, textarea'
          const at = e.tr.contains(document.activeElement) ? [...e.tr.querySelectorAll(sel)].indexOf(document.activeElement) : -1
          e.tr.replaceWith(tr)
          const f = at >= 0 ? tr.querySelectorAll(sel)[at] : null
          if (f) f.focus({ preventScroll: true })
        }
        e = { tr, sig: s }
        rows.set(k, e)
      }
      const want = prev ? prev.nextSibling : tbody.firstChild
      if (want !== e.tr) tbody.insertBefore(e.tr, want)
      prev = e.tr
    }
    for (const [k, e] of rows) if (!seen.has(k)) { e.tr.remove(); rows.delete(k) }
  }

  return { el: h('div.table-wrap', table), table, tbody, update }
}
