// Small DOM helpers. Text from the server only ever becomes text nodes or attribute values: nothing is
// parsed as HTML, and no inline style is set (the CSP refuses style attributes).

// h('tag.class1.class2', {attr: value, onclick: fn, dataset...}, ...children)
export function h(spec, attrs, ...children) {
  const [tag, ...classes] = spec.split('.')
  const el = document.createElement(tag || 'div')
  if (classes.length) el.className = classes.join(' ')
  if (attrs && (typeof attrs !== 'object' || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs)
    attrs = null
  }
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v)
      else if (k === 'class') el.className = [el.className, v].filter(Boolean).join(' ')
      else if (k === 'text') el.textContent = String(v)
      else if (k === 'value') el.value = v
      else if (k === 'checked' || k === 'selected' || k === 'disabled' || k === 'hidden' || k === 'required' || k === 'multiple')
        el[k] = Boolean(v)
      else if (k === 'style') throw new Error('no inline style')
      else el.setAttribute(k, v === true ? '' : String(v))
    }
  }
  append(el, children)
  return el
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false || c === '') continue
    el.append(c instanceof Node ? c : document.createTextNode(String(c)))
  }
  return el
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild)
  return el
}

export function replace(el, ...children) {
  clear(el)
  return append(el, children)
}

// A labelled field: <div class="field"><label for=id>text</label>control</div>
let uid = 0
export function field(label, control, hint) {
  if (!control.id) control.id = 'f' + ++uid
  const parts = [h('label', { for: control.id }, label), control]
  if (hint) {
    const hid = control.id + '-hint'
    control.setAttribute('aria-describedby', hid)
    parts.push(h('span.hint', { id: hid }, hint))
  }
  return h('div.field', parts)
}
export const nextId = (p = 'x') => p + ++uid

// Definition list from [label, value] pairs; values may be nodes. Empty values are skipped.
export function dl(pairs, cls = 'kv') {
  const el = h('dl.' + cls)
  for (const [k, v] of pairs) {
    if (v === undefined || v === null || v === '' || (Array.isArray(v) && !v.length)) continue
    el.append(h('dt', k), h('dd', v instanceof Node || Array.isArray(v) ? v : String(v)))
  }
  return el
}
