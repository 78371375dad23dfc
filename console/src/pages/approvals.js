// #/approvals: the inbox. Pending approvals, newest first, each with everything that decides what would run;
// approve or deny at once (with an optional reason); j/k/a/d shortcuts; decided items move to History.
import { h, dl, replace } from '../dom.js'
import { api, enc, errText } from '../api.js'
import { can, approvals } from '../store.js'
import { badge } from '../components/badge.js'
import { toast, toastError } from '../components/toast.js'
import { parsePatch, renderDiff } from '../components/diff.js'
import { time, age, until, bytes } from '../format.js'

// Decided approvals seen in this browser session (newest first), kept across page changes.
const history = []
const sandboxCache = new Map() // sandbox id -> Promise<sandbox|null>
export function clearHistory() { history.length = 0; sandboxCache.clear() }

function remember(a, decision) {
  if (history.some((x) => x.id === a.id)) return
  history.unshift({ ...a, ...decision, seen_at: new Date().toISOString() })
  if (history.length > 200) history.pop()
}

function sandboxOf(id) {
  if (!sandboxCache.has(id)) sandboxCache.set(id, api.get(`/v1/sandboxes/${enc(id)}`, { quiet401: true }).catch(() => null))
  return sandboxCache.get(id)
}

export function approvalsPage({ main, setTitle }) {
  setTitle('Approvals')
  if (!can.decide()) {
    replace(main,
      h('div.page-head', h('h1', 'Approvals')),
      h('section.inbox', { 'data-testid': 'approvals-inbox', 'aria-label': 'Approvals inbox' },
        h('p.callout', 'Commands held for approval are decided by approver and admin keys. An agent key cannot see or decide them: its held commands wait here for a human.')))
    return null
  }

  const items = new Map() // id -> {el, data}
  let selected = null
  let known = new Set()
  let first = true
  const list = h('div.inbox-list')
  const empty = h('p.empty-inbox', 'Nothing waits for a decision.')
  const status = h('p.status-line', { role: 'status' })
  const historyList = h('div.history')
  const help = h('p.help', { id: 'inbox-keys' }, 'Keys: ', h('kbd', 'j'), ' / ', h('kbd', 'k'), ' next / previous · ', h('kbd', 'a'), ' approve · ', h('kbd', 'd'), ' deny · ', h('kbd', 'r'), ' reason')
  const inbox = h('section.inbox', { 'data-testid': 'approvals-inbox', 'aria-labelledby': 'inbox-h', 'aria-describedby': 'inbox-keys' },
    h('div.inbox-head', h('h2', { id: 'inbox-h' }, 'Pending'), h('span.count-pill', '0')),
    help, list, empty, status)

  replace(main,
    h('div.page-head', h('h1', 'Approvals'), h('div.spacer'), h('span.muted', 'Live: new requests appear without a reload.')),
    inbox,
    h('section.section', { 'aria-labelledby': 'hist-h' }, h('h2', { id: 'hist-h' }, 'History'), h('p.muted', 'Decisions seen in this browser session, newest first.'), historyList))

  function sync() {
    if (approvals.error) { status.textContent = 'Could not load approvals: ' + errText(approvals.error); return }
    status.textContent = ''
    const pending = approvals.list.slice().sort((a, b) => String(b.requested_at).localeCompare(String(a.requested_at)))
    const ids = new Set(pending.map((a) => a.id))
    // gone from the pending list without our decision: decided elsewhere, expired or cancelled
    for (const [id, it] of items) {
      if (!ids.has(id)) {
        it.el.remove()
        items.delete(id)
        if (!history.some((x) => x.id === id)) resolveElsewhere(it.data)
      }
    }
    let prev = null
    for (const a of pending) {
      let it = items.get(a.id)
      if (!it) {
        it = { el: item(a), data: a }
        items.set(a.id, it)
        if (!first && !known.has(a.id)) it.el.classList.add('is-new')
      }
      const want = prev ? prev.nextSibling : list.firstChild
      if (want !== it.el) list.insertBefore(it.el, want)
      prev = it.el
      known.add(a.id)
    }
    first = false
    empty.hidden = pending.length > 0
    inbox.querySelector('.count-pill').textContent = String(pending.length)
    if (selected && !items.has(selected)) selected = null
    if (!selected && pending.length) select(pending[0].id, false)
    drawHistory()
  }

  async function resolveElsewhere(a) {
    try {
      const r = await api.get(`/v1/approvals/${enc(a.id)}`, { quiet401: true })
      remember(r, {})
    } catch { remember(a, { state: 'gone' }) }
    drawHistory()
  }

  function drawHistory() {
    replace(historyList, history.length ? h('ul.history-list', history.map((a) => h('li.history-item',
      badge(a.state || a.decision_state || '?'),
      h('code.cmd', a.command || a.package || '—'),
      h('span.sub.mono', a.id),
      a.decision ? h('span.sub', `by ${a.decision.by || '?'}${a.decision.reason ? ' · “' + a.decision.reason + '”' : ''} · ${time(a.decision.at)}`) : h('span.sub', 'seen ' + time(a.seen_at))))) : h('p.muted', 'No decisions yet.'))
  }

  function select(id, focus = true) {
    selected = id
    for (const [k, it] of items) it.el.classList.toggle('is-selected', k === id)
    const it = items.get(id)
    if (it && focus) { it.el.scrollIntoView({ block: 'nearest' }); it.el.focus() }
  }

  async function decide(a, decision, el) {
    const reasonInput = el.querySelector('[data-testid="decision-reason"]')
    const reason = reasonInput ? reasonInput.value.trim() : ''
    for (const b of el.querySelectorAll('button.decide')) b.disabled = true
    const body = { decision, reason }
    if (typeof a.request_digest === 'string' && a.request_digest) body.request_digest = a.request_digest
    try {
      const r = await api.post(`/v1/approvals/${enc(a.id)}`, body)
      remember(a, { state: decision === 'approve' ? 'approved' : 'denied', decision: (r && r.decision) || { by: 'you', reason, at: new Date().toISOString() }, record_state: r && r.state })
      toast(`${decision === 'approve' ? 'Approved' : 'Denied'}: ${a.command || a.id}`)
      approvals.list = approvals.list.filter((x) => x.id !== a.id)
      approvals.emit()
      approvals.refresh()
    } catch (e) {
      toastError(e)
      for (const b of el.querySelectorAll('button.decide')) b.disabled = false
      if (e.status === 409) approvals.refresh()
    }
  }

  function item(a) {
    const titleId = 'apr-' + a.id.replace(/[^\w-]/g, '')
    const reason = h('input', { type: 'text', 'data-testid': 'decision-reason', name: 'reason', placeholder: 'Reason (optional, recorded with the decision)', autocomplete: 'off', 'aria-label': 'Reason for the decision on ' + a.id })
    const approve = h('button.btn.btn-approve.decide', { type: 'button', 'data-testid': 'approve-button' }, 'Approve')
    const deny = h('button.btn.btn-danger.decide', { type: 'button', 'data-testid': 'deny-button' }, 'Deny')
    const el = h('article.approval', { 'data-testid': 'approval-item', 'data-approval-id': a.id, tabindex: '-1', 'aria-labelledby': titleId })
    approve.addEventListener('click', () => decide(a, 'approve', el))
    deny.addEventListener('click', () => decide(a, 'deny', el))
    el.addEventListener('focusin', () => { if (selected !== a.id) select(a.id, false) })
    el.addEventListener('click', () => { if (selected !== a.id) select(a.id, false) })

    const kind = a.kind || (a.push_id ? 'publish' : a.package ? 'package' : 'exec')
    const what = a.command || a.package || (a.repo ? `push ${a.branch} to ${a.repo}` : a.id)
    const head = h('div.approval-head',
      h('h3.approval-title', { id: titleId }, h('code.cmd.cmd-big', what)),
      h('div.approval-tags', badge(kind, 'info'), a.class && a.class !== kind ? badge(a.class, 'warn') : null, a.purpose ? badge(a.purpose, 'info') : null))
    const meta = h('p.approval-meta',
      h('span.mono', a.id), ' · sandbox ', h('a.mono', { href: '#/sandboxes/' + enc(a.sandbox) }, a.sandbox),
      a.tenant ? ' · tenant ' + a.tenant : '',
      ' · requested ', h('span', { title: time(a.requested_at) }, age(a.requested_at) + ' ago'),
      a.expires_at ? [' · expires ', h('span', { title: time(a.expires_at) }, until(a.expires_at))] : '')
    const env = (vars) => (vars && vars.length ? h('ul.envlist', vars.map((v) => h('li', h('code', `${v.name}=${v.value}`)))) : '')
    const policy = a.policy && typeof a.policy === 'object' ? a.policy : null
    const facts = dl([
      ['Why held', a.reason],
      ['Rule', policy ? [policy.decision ? badge(policy.decision) : null, ' ', policy.reason || '', policy.part ? h('span.sub', ' matched: ' + policy.part) : null, policy.inline_code ? h('span.sub', ' inline code') : null] : ''],
      ['Command', a.shell !== undefined ? h('code.block', a.shell) : a.argv ? h('code.block', JSON.stringify(a.argv)) : ''],
      ['Working dir', a.cwd !== undefined ? (a.cwd || '(the user\'s home)') : ''],
      ['User', a.user],
      ['Timeout', a.timeout_s ? a.timeout_s + ' s' : ''],
      ['Environment', env(a.env)],
      ['Sandbox env', env(a.sandbox_env)],
      ['Secrets injected', a.secrets && a.secrets.length ? a.secrets.join(', ') : ''],
      ['Stdin', a.stdin ? h('span', `${bytes(a.stdin.bytes)}${a.stdin.streamed ? ', streamed (more may follow once it runs)' : ''} · sha256 `, h('code.hash', a.stdin.sha256 || '—')) : ''],
      ['Masked', a.masked && Object.keys(a.masked).length ? Object.entries(a.masked).map(([k, v]) => `${k} (${v})`).join(', ') : ''],
      ['Package', a.package],
      ['Repository', a.repo],
      ['Branch', a.branch],
      ['Commit', a.commit ? h('code.hash', a.commit) : ''],
      ['Base', a.base ? h('code.hash', a.base) : ''],
      ['Tree', a.tree ? h('code.hash', a.tree) : ''],
      ['Remote now', a.lease !== undefined && a.kind === 'publish' ? (a.lease ? h('code.hash', a.lease) : '(branch absent)') : ''],
      ['Evidence', a.evidence && a.evidence.id ? h('a.mono', { href: '#/evidence/' + enc(a.evidence.id) }, a.evidence.id) : a.evidence_reason || ''],
      ['Request digest', a.request_digest ? h('code.hash', a.request_digest) : ''],
      [a.push_id ? 'Push' : 'Exec', h('span.mono', [a.push_id || a.exec_id, a.record_state ? ` (${a.record_state})` : ''].join(''))],
      ['Node', a.node],
    ])
    sandboxOf(a.sandbox).then((sb) => {
      if (!sb) return
      const more = []
      if (sb.task && (sb.task.prompt || sb.task.id)) more.push(['Task', [sb.task.id ? h('span.mono', sb.task.id + ' ') : null, sb.task.prompt ? h('span.prompt-inline', sb.task.prompt.slice(0, 600)) : null]])
      if (sb.task && sb.task.requested_by) more.push(['Requested by', sb.task.requested_by])
      if (sb.metadata && Object.keys(sb.metadata).length) more.push(['Metadata', Object.entries(sb.metadata).map(([k, v]) => `${k}=${v}`).join(', ')])
      more.push(['Template', sb.template])
      facts.append(...[...dl(more).children])
    })
    const diffBox = h('div.approval-diff')
    if (kind === 'publish') {
      const ds = a.diffstat
      if (ds) diffBox.append(h('p.sub', `${ds.files ? ds.files.length : 0} files, `, h('span.add', '+' + ds.additions), ' ', h('span.del', '−' + ds.deletions)))
      const load = h('button.btn.btn-small', { type: 'button' }, 'Show the exact diff')
      load.addEventListener('click', async () => {
        load.disabled = true
        try {
          const text = await api.text(`/v1/approvals/${enc(a.id)}/patch`)
          const files = parsePatch(text)
          replace(diffBox, files.length ? renderDiff(files) : h('p', 'No changes.'))
        } catch (e) { load.disabled = false; diffBox.append(h('p.error', errText(e))) }
      })
      diffBox.append(load)
      // the diff decides a push: show it at once
      queueMicrotask(() => load.click())
    }
    el.append(head, meta, facts, diffBox,
      h('div.decision', reason, approve, deny))
    return el
  }

  function onKey(e) {
    if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return
    const tag = (e.target && e.target.tagName) || ''
    if (/^(INPUT|TEXTAREA|SELECT)$/.test(tag) || (e.target && e.target.isContentEditable)) return
    if (document.querySelector('dialog[open]')) return
    const order = [...list.children].map((x) => x.dataset.approvalId)
    if (!order.length) return
    const i = Math.max(0, order.indexOf(selected))
    const cur = items.get(order[i])
    if (e.key === 'j') { e.preventDefault(); select(order[Math.min(order.length - 1, i + 1)]) }
    else if (e.key === 'k') { e.preventDefault(); select(order[Math.max(0, i - 1)]) }
    else if (e.key === 'a' && cur) { e.preventDefault(); decide(cur.data, 'approve', cur.el) }
    else if (e.key === 'd' && cur) { e.preventDefault(); decide(cur.data, 'deny', cur.el) }
    else if (e.key === 'r' && cur) { e.preventDefault(); cur.el.querySelector('[data-testid="decision-reason"]').focus() }
  }
  document.addEventListener('keydown', onKey)
  const off = approvals.on(sync)
  if (approvals.loaded) sync()
  approvals.refresh()
  drawHistory()
  return () => { off(); document.removeEventListener('keydown', onKey) }
}
