// A small line-by-line syntax colouring for diffs: comments, strings, numbers and keywords of common
// languages, picked by file extension. Output is text nodes and <span class="tk-*"> only.
import { h } from '../dom.js'

const KW = {
  c: 'auto break case catch char class const constexpr continue default delete do double else enum explicit extern false final float for friend goto if inline int long namespace new noexcept nullptr operator override private protected public return short signed sizeof static struct switch template this throw true try typedef typename union unsigned using virtual void volatile while',
  js: 'as async await break case catch class const continue debugger default delete do else export extends false finally for from function if import in instanceof interface let new null of private protected public readonly return static super switch this throw true try type typeof undefined var void while yield',
  go: 'break case chan const continue default defer else fallthrough false for func go goto if import interface map nil package range return select struct switch true type var',
  rs: 'as async await break const continue crate else enum extern false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while',
  py: 'and as assert async await break class continue def del elif else except False finally for from global if import in is lambda None nonlocal not or pass raise return True try while with yield self',
  sh: 'case do done elif else esac export fi for function if in local readonly return set shift then unset until while echo exit',
  rb: 'begin class def do else elsif end ensure false if module next nil not or redo rescue retry return self super then true unless until when while yield require',
  java: 'abstract boolean break byte case catch char class const continue default do double else enum extends final finally float for if implements import instanceof int interface long native new null package private protected public return short static super switch synchronized this throw throws true false try void volatile while var val fun object when',
  sql: 'select from where insert into update delete create table alter drop join left right inner outer on and or not null primary key values group by order having limit as',
  data: 'true false null yes no',
}
const LANG = {
  c: 'c', h: 'c', cc: 'c', cpp: 'c', cxx: 'c', hpp: 'c', hh: 'c', cs: 'java', m: 'c',
  js: 'js', mjs: 'js', cjs: 'js', jsx: 'js', ts: 'js', tsx: 'js', vue: 'js', svelte: 'js',
  go: 'go', rs: 'rs', py: 'py', pyi: 'py', sh: 'sh', bash: 'sh', zsh: 'sh', rb: 'rb',
  java: 'java', kt: 'java', kts: 'java', scala: 'java', swift: 'java', php: 'js', dart: 'java',
  sql: 'sql', json: 'data', yaml: 'data', yml: 'data', toml: 'data', ini: 'data', cfg: 'data', css: 'css', scss: 'css', less: 'css',
  html: 'xml', htm: 'xml', xml: 'xml', svg: 'xml', cmake: 'sh', mk: 'sh',
}
const HASH_COMMENT = new Set(['py', 'sh', 'rb', 'data'])
const sets = {}
const kw = (lang) => sets[lang] || (sets[lang] = new Set((KW[lang] || '').split(' ')))

export function langOf(path) {
  const base = String(path).split('/').pop().toLowerCase()
  if (base === 'makefile' || base === 'dockerfile' || base.endsWith('.dockerfile')) return 'sh'
  if (base === 'cmakelists.txt') return 'sh'
  const ext = base.includes('.') ? base.split('.').pop() : ''
  return LANG[ext] || ''
}

// Returns an array of nodes for one line of code. `state` carries an open block comment across lines.
export function highlightLine(text, lang, state = {}) {
  if (!lang || text.length > 2000) return [text]
  const out = []
  let i = 0, plain = ''
  const flush = () => { if (plain) { out.push(plain); plain = '' } }
  const tok = (cls, s) => { flush(); out.push(h('span.tk-' + cls, s)) }
  const cStyle = lang !== 'py' && lang !== 'sh' && lang !== 'rb' && lang !== 'data' && lang !== 'xml'
  if (state.block) {
    const end = text.indexOf(state.block)
    if (end < 0) return [h('span.tk-c', text)]
    tok('c', text.slice(0, end + state.block.length))
    i = end + state.block.length
    state.block = null
  }
  if (lang === 'xml') {
    const re = /(<!--.*?(?:-->|$))|(<\/?[\w:.-]+)|("[^"]*"|'[^']*')|(\/?>)/g
    let last = 0, m
    while ((m = re.exec(text))) {
      if (m.index > last) out.push(text.slice(last, m.index))
      out.push(h('span.tk-' + (m[1] ? 'c' : m[2] ? 'k' : m[3] ? 's' : 'k'), m[0]))
      last = re.lastIndex
    }
    if (last < text.length) out.push(text.slice(last))
    return out
  }
  const words = kw(lang === 'css' ? 'data' : lang)
  while (i < text.length) {
    const c = text[i], n = text[i + 1]
    if ((cStyle || lang === 'css') && c === '/' && n === '*') {
      const end = text.indexOf('*/', i + 2)
      if (end < 0) { tok('c', text.slice(i)); state.block = '*/'; return (flush(), out) }
      tok('c', text.slice(i, end + 2)); i = end + 2; continue
    }
    if (cStyle && lang !== 'css' && c === '/' && n === '/') { tok('c', text.slice(i)); break }
    if (lang === 'sql' && c === '-' && n === '-') { tok('c', text.slice(i)); break }
    if (HASH_COMMENT.has(lang) && c === '#' && (i === 0 || /\s/.test(text[i - 1]))) { tok('c', text.slice(i)); break }
    if (lang === 'py' && (text.startsWith('"""', i) || text.startsWith("'''", i))) {
      const q = text.slice(i, i + 3), end = text.indexOf(q, i + 3)
      if (end < 0) { tok('s', text.slice(i)); state.block = q; return (flush(), out) }
      tok('s', text.slice(i, end + 3)); i = end + 3; continue
    }
    if (c === '"' || c === "'" || (c === '`' && lang === 'js')) {
      let j = i + 1
      while (j < text.length && text[j] !== c) j += text[j] === '\\' ? 2 : 1
      tok('s', text.slice(i, j + 1)); i = j + 1; continue
    }
    if (/[0-9]/.test(c) && (i === 0 || !/[\w$]/.test(text[i - 1]))) {
      const m = /^(0x[0-9a-f_]+|[0-9][0-9_]*(\.[0-9_]+)?(e[+-]?[0-9]+)?)[a-z]*/i.exec(text.slice(i))
      tok('n', m[0]); i += m[0].length; continue
    }
    if (/[A-Za-z_$@]/.test(c)) {
      const m = /^[A-Za-z_$@][\w$]*/.exec(text.slice(i))
      const w = m[0]
      if (words.has(lang === 'sql' ? w.toLowerCase() : w)) tok('k', w)
      else plain += w
      i += w.length; continue
    }
    plain += c; i++
  }
  flush()
  return out
}
