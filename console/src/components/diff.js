// Git's unified patch format: parsed per file, rendered as a file tree and a coloured unified diff.
import { h, nextId } from '../dom.js'
import { highlightLine, langOf } from './highlight.js'

const unq = (p) => {
  // git quotes odd paths: "a/na\303\257ve.txt"
  if (!p.startsWith('"')) return p
  try {
    const body = p.slice(1, -1)
    const bytes = []
    for (let i = 0; i < body.length; i++) {
      if (body[i] === '\\') {
        const n = body[i + 1]
        if (/[0-7]/.test(n)) { bytes.push(parseInt(body.substr(i + 1, 3), 8)); i += 3; continue }
        bytes.push(({ n: 10, t: 9, '"': 34, '\\': 92 })[n] ?? n.charCodeAt(0)); i++; continue
      }
      for (const b of new TextEncoder().encode(body[i])) bytes.push(b)
    }
    return new TextDecoder().decode(new Uint8Array(bytes))
  } catch { return p }
}
const strip = (p) => (p === '/dev/null' ? '' : unq(p).replace(/^"?[ab]\//, ''))

export function parsePatch(text) {
  const files = []
  let f = null, hunk = null, oldNo = 0, newNo = 0
  const lines = String(text || '').split('\n')
  if (lines.length && lines[lines.length - 1] === '') lines.pop()
  for (const line of lines) {
    if (line.startsWith('diff --git ')) {
      const m = /^diff --git ("(?:[^"\\]|\\.)*"|\S+) ("(?:[^"\\]|\\.)*"|\S+)$/.exec(line)
      f = { oldPath: m ? strip(m[1]) : '', newPath: m ? strip(m[2]) : '', meta: [], hunks: [], binary: false, status: 'modified', additions: 0, deletions: 0 }
      files.push(f); hunk = null; continue
    }
    if (!f) continue
    if (hunk && line === '') { hunk.lines.push({ t: ' ', text: '', o: oldNo++, n: newNo++ }); continue }
    if (!hunk || (!/^[ +\-\\]/.test(line) && !line.startsWith('@@'))) {
      if (line.startsWith('--- ')) { const p = strip(line.slice(4).split('\t')[0]); if (p) f.oldPath = p; else f.status = 'added'; continue }
      if (line.startsWith('+++ ')) { const p = strip(line.slice(4).split('\t')[0]); if (p) f.newPath = p; else f.status = 'deleted'; continue }
      if (line.startsWith('new file mode')) f.status = 'added'
      else if (line.startsWith('deleted file mode')) f.status = 'deleted'
      else if (line.startsWith('rename from ')) { f.status = 'renamed'; f.oldPath = unq(line.slice(12)) }
      else if (line.startsWith('rename to ')) f.newPath = unq(line.slice(10))
      else if (line.startsWith('copy from ')) f.status = 'copied'
      else if (line.startsWith('Binary files') || line === 'GIT binary patch') f.binary = true
      if (!line.startsWith('@@')) { f.meta.push(line); if (f.binary) hunk = null; continue }
    }
    if (line.startsWith('@@')) {
      const m = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@(.*)$/.exec(line)
      oldNo = m ? +m[1] : 0; newNo = m ? +m[2] : 0
      hunk = { header: line, lines: [] }
      f.hunks.push(hunk); continue
    }
    if (!hunk) { f.meta.push(line); continue }
    const t = line[0]
    if (t === '+') { hunk.lines.push({ t, text: line.slice(1), n: newNo++ }); f.additions++ }
    else if (t === '-') { hunk.lines.push({ t, text: line.slice(1), o: oldNo++ }); f.deletions++ }
    else if (t === '\\') hunk.lines.push({ t, text: line })
    else hunk.lines.push({ t: ' ', text: line.slice(1), o: oldNo++, n: newNo++ })
  }
  for (const x of files) x.path = x.newPath || x.oldPath
  return files
}

const MAX_LINES = 20000

// The unified diff of the parsed files; `ids` maps path -> element id for the tree's links.
export function renderDiff(files, { ids = new Map(), collapseOver = 1500 } = {}) {
  const root = h('div.diff')
  let budget = MAX_LINES
  for (const f of files) {
    const id = ids.get(f.path) || nextId('file')
    ids.set(f.path, id)
    const total = f.hunks.reduce((a, x) => a + x.lines.length, 0)
    const head = h('div.diff-file-head',
      h('span.diff-status.st-' + f.status, f.status),
      h('span.diff-path', f.status === 'renamed' && f.oldPath !== f.newPath ? `${f.oldPath} → ${f.newPath}` : f.path),
      h('span.diff-stat', h('span.add', '+' + f.additions), ' ', h('span.del', '−' + f.deletions)))
    const body = h('div.diff-body')
    const section = h('section.diff-file', { id, 'aria-label': 'Changes in ' + f.path, tabindex: '-1' }, head, body)
    root.append(section)
    if (f.binary) { body.append(h('p.diff-note', 'Binary file: not shown.')); continue }
    if (!f.hunks.length) { body.append(h('p.diff-note', f.meta.filter((m) => /mode|rename|similarity/.test(m)).join('; ') || 'No textual change.')); continue }
    const fill = () => {
      const lang = langOf(f.path)
      const state = {}
      const frag = document.createDocumentFragment()
      for (const hk of f.hunks) {
        frag.append(h('div.dl.dl-hunk', h('span.ln', { 'aria-hidden': 'true' }, '…'), h('span.ln', { 'aria-hidden': 'true' }, '…'), h('code.code', hk.header)))
        for (const l of hk.lines) {
          if (budget-- <= 0) break
          const cls = l.t === '+' ? 'dl-add' : l.t === '-' ? 'dl-del' : l.t === '\\' ? 'dl-meta' : 'dl-ctx'
          const mark = l.t === '\\' ? '' : l.t === ' ' ? ' ' : l.t === '-' ? '−' : '+'
          frag.append(h('div.dl.' + cls,
            h('span.ln', { 'aria-hidden': 'true' }, l.o ?? ''),
            h('span.ln', { 'aria-hidden': 'true' }, l.n ?? ''),
            h('code.code', h('span.mark', mark), l.t === '\\' ? l.text : highlightLine(l.text, lang, state))))
        }
      }
      if (budget <= 0) frag.append(h('p.diff-note', 'The rest of this patch is too long to show here: download the bundle for all of it.'))
      body.append(frag)
    }
    if (total > collapseOver) {
      const btn = h('button.btn.btn-small', { type: 'button' }, `Show ${total} lines`)
      btn.addEventListener('click', () => { btn.remove(); fill() })
      body.append(h('p.diff-note', 'A large change. ', btn))
    } else fill()
  }
  return root
}

// A file tree of paths (nested by directory) linking to the diff's sections.
// entries: [{path, status, additions, deletions, extra?: [labels]}]
export function renderTree(entries, ids) {
  const root = { dirs: new Map(), files: [] }
  for (const e of entries) {
    const parts = e.path.split('/')
    let node = root
    for (const d of parts.slice(0, -1)) {
      if (!node.dirs.has(d)) node.dirs.set(d, { dirs: new Map(), files: [] })
      node = node.dirs.get(d)
    }
    node.files.push({ ...e, name: parts[parts.length - 1] })
  }
  const walk = (node) => {
    const ul = h('ul')
    for (const [name, d] of [...node.dirs].sort((a, b) => a[0].localeCompare(b[0]))) {
      // a directory with one child directory and no files is shown as one a/b entry
      let label = name, cur = d
      while (cur.files.length === 0 && cur.dirs.size === 1) { const [[n, c]] = [...cur.dirs]; label += '/' + n; cur = c }
      ul.append(h('li.tree-dir', h('span.tree-dirname', label + '/'), walk(cur)))
    }
    for (const f of node.files.sort((a, b) => a.name.localeCompare(b.name))) {
      const id = ids && ids.get(f.path)
      const name = id ? h('a', { href: '#' + id, 'data-target': id }, f.name) : h('span', f.name)
      ul.append(h('li.tree-file',
        h('span.diff-status.st-' + (f.status || 'modified'), { title: f.status || 'modified' }, (f.status || 'modified')[0].toUpperCase()),
        name,
        h('span.diff-stat', f.additions !== undefined ? h('span.add', '+' + f.additions) : null, ' ', f.deletions !== undefined ? h('span.del', '−' + f.deletions) : null),
        (f.extra || []).map((x) => h('span.tag', x))))
    }
    return ul
  }
  const tree = h('nav.tree', { 'aria-label': 'Changed files' }, walk(root))
  // in-page links: the router owns the hash, so these scroll instead of navigating
  tree.addEventListener('click', (e) => {
    const a = e.target.closest('a[data-target]')
    if (!a) return
    e.preventDefault()
    const el = document.getElementById(a.dataset.target)
    if (el) { el.scrollIntoView({ block: 'start' }); el.focus({ preventScroll: true }) }
  })
  return tree
}
