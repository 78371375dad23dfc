// #/evidence/{id}: the review of an evidence bundle, diff first. The bundle (.tar.gz) is read in the browser:
// changes (patch and per-file facts), findings, tests, commands, network, packages; its signature is
// checked with the server's evidence keys. Approvers and admins record a review decision.
import { h, dl, replace } from '../dom.js'
import { api, enc, errText, request } from '../api.js'
import { can } from '../store.js'
import { badge, tone } from '../components/badge.js'
import { toast, toastError } from '../components/toast.js'
import { dataTable } from '../components/table.js'
import { parsePatch, renderDiff, renderTree } from '../components/diff.js'
import { gunzip, untar, json, jsonl, text } from '../tar.js'
import { verifyBundle } from '../verify.js'
import { time, bytes, short } from '../format.js'

export function evidencePage({ main, params, setTitle }) {
  const id = params[0]
  setTitle('Review ' + id)
  let alive = true

  const crumbsSandbox = h('li', h('span', '…'))
  const headBadges = h('div.head-badges')
  const download = h('a.btn.btn-small', { href: `/v1/evidence/${enc(id)}`, download: `${id}.tar.gz` }, 'Download bundle')
  const summary = h('div.facts')
  const diffBody = h('div.review-diff-body', h('p.muted', 'Reading the bundle…'))
  const diffPanel = h('section.panel.review-diff', { 'data-testid': 'review-diff', 'aria-labelledby': 'rd-h' },
    h('div.panel-head', h('h2', { id: 'rd-h' }, 'Changes'), h('span.muted.diff-totals')), diffBody)
  const findingsBody = h('div', h('p.muted', 'Reading the bundle…'))
  const findingsPanel = h('section.panel.review-findings', { 'data-testid': 'review-findings', 'aria-labelledby': 'rf-h' },
    h('div.panel-head', h('h2', { id: 'rf-h' }, 'Findings')), findingsBody)
  const testsBody = h('div', h('p.muted', '…'))
  const sigBody = h('div', h('p.muted', 'Checking…'))
  const netBody = h('div', h('p.muted', '…'))
  const pkgBody = h('div', h('p.muted', '…'))
  const cmdBody = h('div', h('p.muted', '…'))
  const reviewBody = h('div')
  const panel = (hid, title, body, cls = '') => h('section.panel' + cls, { 'aria-labelledby': hid }, h('div.panel-head', h('h2', { id: hid }, title)), body)

  replace(main,
    h('nav.crumbs', { 'aria-label': 'Breadcrumb' }, h('ol', h('li', h('a', { href: '#/sandboxes' }, 'Sandboxes')), crumbsSandbox, h('li', h('span', { 'aria-current': 'page' }, id)))),
    h('div.page-head', h('h1', 'Review ', h('span.mono', id)), headBadges, h('div.spacer'), h('a.btn.btn-small', { href: '#review-decision', 'data-jump': 'review-decision' }, 'Go to decision'), download),
    summary,
    diffPanel,
    h('div.grid-2', findingsPanel, panel('rt-h', 'Tests', testsBody)),
    panel('rc-h', 'Commands', cmdBody),
    h('div.grid-2', panel('rn-h', 'Network', netBody), panel('rp-h', 'Packages and dependencies', pkgBody)),
    h('div.grid-2', panel('rs-h', 'Signature', sigBody), h('section.panel', { id: 'review-decision', tabindex: '-1', 'aria-labelledby': 'rv-h' }, h('div.panel-head', h('h2', { id: 'rv-h' }, 'Review decision')), reviewBody)))
  main.querySelector('[data-jump]').addEventListener('click', (e) => {
    e.preventDefault()
    const t = document.getElementById('review-decision')
    t.scrollIntoView({ block: 'start' }); t.focus({ preventScroll: true })
  })

  let info = null
  async function loadInfo() {
    try {
      info = await api.get(`/v1/evidence/${enc(id)}/info`)
      const s = info.summary || {}
      replace(crumbsSandbox, h('a.mono', { href: '#/sandboxes/' + enc(info.sandbox_id) }, info.sandbox_id))
      const sev = s.by_severity || {}
      replace(headBadges, badge(info.kind, 'info'), badge('tests ' + (s.tests || 'not_run'), s.tests === 'passed' ? 'ok' : s.tests === 'failed' ? 'bad' : 'warn'),
        Object.entries(sev).map(([k, n]) => badge(`${n} ${k}`, tone(k))),
        info.review ? badge('review: ' + info.review.decision, info.review.decision) : badge('not reviewed', 'muted'))
      replace(summary, dl([
        ['Sandbox', h('a.mono', { href: '#/sandboxes/' + enc(info.sandbox_id) }, info.sandbox_id)],
        ['Sealed', time(info.created_at)],
        ['Size', bytes(info.size)],
        ['SHA-256', h('code.hash', { title: info.sha256 }, short(info.sha256, 16))],
        ['Kept until', info.expires_at ? time(info.expires_at) : 'while the sandbox lives'],
        ['Node', info.node],
      ], 'kv kv-inline'))
      drawReview(info.review)
    } catch (e) {
      replace(summary, h('p.error', { role: 'alert' }, 'Could not load this bundle: ' + errText(e)))
      replace(findingsBody, h('p.error', errText(e)))
      replace(diffBody, h('p', 'No changes to show: the bundle could not be read.'))
      replace(reviewBody, h('p.muted', '—'))
    }
  }

  function drawReview(rv) {
    const cur = rv ? h('p', badge(rv.decision), ` by ${rv.reviewer || '?'} · ${time(rv.at)}`, rv.reason ? h('span.sub', ' “' + rv.reason + '”') : null) : h('p.muted', 'No review yet.')
    if (!can.decide()) { replace(reviewBody, cur, h('p.muted', 'Approver and admin keys record review decisions.')); return }
    const reason = h('textarea', { id: 'review-reason', name: 'reason', rows: 3, maxlength: '4000' })
    const ok = h('button.btn.btn-approve', { type: 'button' }, 'Approve change')
    const no = h('button.btn.btn-danger', { type: 'button' }, 'Reject change')
    const send = async (decision) => {
      ok.disabled = no.disabled = true
      try {
        const r = await api.post(`/v1/evidence/${enc(id)}/review`, { decision, reason: reason.value.trim() })
        toast(`Recorded: ${decision} (signed as a human-review attestation)`)
        drawReview(r)
        loadInfo()
      } catch (e) { toastError(e); ok.disabled = no.disabled = false }
    }
    ok.addEventListener('click', () => send('approve'))
    no.addEventListener('click', () => send('reject'))
    replace(reviewBody, cur, h('div.field', h('label', { for: 'review-reason' }, 'Reason'), reason), h('div.form-actions', ok, no))
  }

  async function loadBundle() {
    let files
    try {
      const res = await request('GET', `/v1/evidence/${enc(id)}`)
      const buf = new Uint8Array(await res.arrayBuffer())
      files = untar(await gunzip(buf))
    } catch (e) {
      if (!alive) return
      replace(diffBody, h('p', 'No changes to show: the bundle could not be read (' + errText(e) + ').'))
      const kinds = (info && info.summary && info.summary.findings) || []
      replace(findingsBody, kinds.length ? h('ul', kinds.map((k) => h('li', k))) : h('p', 'No findings.'))
      for (const b of [testsBody, netBody, pkgBody, cmdBody, sigBody]) replace(b, h('p.muted', 'Not available.'))
      return
    }
    if (!alive) return
    const manifest = json(files, 'manifest.json') || {}
    drawDiff(files, manifest)
    drawFindings(json(files, 'findings.json'))
    drawTests(json(files, 'tests/summary.json'))
    drawCommands(jsonl(files, 'commands/commands.jsonl') || [])
    drawNetwork(jsonl(files, 'network/egress.jsonl') || [])
    drawPackages(jsonl(files, 'packages/packages.jsonl') || [], (json(files, 'changes/dependencies.json') || {}).changes || [])
    drawManifest(manifest)
    let keys = []
    try { keys = ((await api.get('/v1/evidence/keys')) || {}).keys || [] } catch {}
    const v = await verifyBundle(files, manifest, keys)
    if (!alive) return
    replace(sigBody,
      h('p', badge(v.status === 'verified' ? 'verified' : v.status === 'invalid' ? 'invalid' : 'unchecked', v.status === 'verified' ? 'ok' : v.status === 'invalid' ? 'bad' : 'warn'),
        ' ', v.status === 'verified' ? 'Checked in this browser with the server\'s evidence key.' : v.status === 'invalid' ? 'The bundle does not verify.' : 'Not checked.'),
      dl([['Algorithm', manifest.signing && manifest.signing.alg], ['Key', v.keyid ? h('code.hash', v.keyid) : '']]),
      v.passed.length ? h('ul.checks', v.passed.map((p) => h('li.check-ok', p))) : null,
      v.problems.length ? h('ul.checks', v.problems.map((p) => h('li.check-bad', p))) : null,
      h('p.sub', 'Offline: airlock evidence verify ' + id + '.tar.gz'))
    headBadges.append(badge('signature ' + v.status, v.status === 'verified' ? 'ok' : v.status === 'invalid' ? 'bad' : 'warn'))
  }

  function drawManifest(m) {
    const ws = m.workspace
    const bits = []
    if (m.task && (m.task.id || m.task.prompt)) bits.push(['Task', [m.task.id ? h('span.mono', m.task.id + ' ') : null, m.task.prompt ? h('span', m.task.prompt.slice(0, 300)) : null]])
    if (m.task && m.task.requested_by) bits.push(['Requested by', m.task.requested_by])
    if (m.template && m.template.name) bits.push(['Template', m.template.name])
    if (ws && typeof ws === 'object' && ws.repo) {
      bits.push(['Repository', ws.repo], ['Branch', ws.branch], ['Base', h('code.hash', short(ws.base_commit || '', 12))], ['Final tree', h('code.hash', short(ws.final_tree || '', 12))])
    }
    if (bits.length) summary.append(dl(bits, 'kv kv-inline'))
  }

  function drawDiff(files, manifest) {
    const patch = text(files, 'changes/changes.patch') || ''
    const facts = ((json(files, 'changes/files.json') || {}).files) || []
    const parsed = parsePatch(patch)
    const totals = main.querySelector('.diff-totals')
    if (!parsed.length && !facts.length) {
      replace(diffBody, h('p.no-changes', 'No changes: this bundle records no change to the workspace' + (manifest.workspace ? '.' : ' (the sandbox has no workspace).')))
      totals.textContent = ''
      return
    }
    const factBy = new Map(facts.map((f) => [f.path, f]))
    const ids = new Map()
    const diff = renderDiff(parsed, { ids })
    const entries = (parsed.length ? parsed : facts).map((f) => {
      const x = factBy.get(f.path) || {}
      const extra = []
      if (x.in_scope === false) extra.push('out of scope')
      if (x.sensitive) extra.push('sensitive')
      if (x.generated) extra.push('generated')
      if (x.lockfile) extra.push('lockfile')
      return { path: f.path, status: x.status || f.status, additions: x.additions ?? f.additions, deletions: x.deletions ?? f.deletions, extra }
    })
    for (const f of facts) if (!parsed.some((p) => p.path === f.path)) entries.push({ path: f.path, status: f.status, additions: f.additions, deletions: f.deletions, extra: f.binary ? ['binary'] : [] })
    const add = entries.reduce((a, e) => a + (e.additions || 0), 0), del = entries.reduce((a, e) => a + (e.deletions || 0), 0)
    totals.textContent = `${entries.length} file${entries.length === 1 ? '' : 's'}, +${add} −${del}`
    replace(diffBody, h('div.review-split', renderTree(entries, ids), h('div.review-diff-main', diff)))
  }

  function drawFindings(f) {
    const list = (f && f.findings) || []
    if (!list.length) { replace(findingsBody, h('p', badge('none', 'ok'), ' No findings: nothing in the records needs a reviewer\'s question.')); return }
    const order = { critical: 0, high: 1, medium: 2, low: 3, info: 4 }
    list.sort((a, b) => (order[a.severity] ?? 9) - (order[b.severity] ?? 9))
    replace(findingsBody, h('ul.findings', list.map((x) => h('li.finding',
      h('div.finding-head', badge(x.severity || 'info'), h('strong', x.kind)),
      h('p', x.summary || ''),
      Array.isArray(x.evidence) && x.evidence.length ? h('ul.finding-ev', x.evidence.slice(0, 8).map((e) => h('li', h('code', [e.file, e.ref, e.test, e.at].filter(Boolean).join(' · '))))) : null))))
  }

  function drawTests(t) {
    if (!t) { replace(testsBody, h('p.muted', 'No test summary in the bundle.')); return }
    const runs = dataTable([
      { label: 'Command', cell: (r) => h('code.cmd', r.command || r.exec_id) },
      { label: 'Exit', cls: 'num', cell: (r) => badge(String(r.exit_code), r.exit_code === 0 && !r.timed_out ? 'ok' : 'bad') },
      { label: 'Ended', cls: 'num', cell: (r) => time(r.ended_at) },
    ], { key: (r) => r.exec_id + r.ended_at, caption: 'Test runs', empty: 'No test run was recorded.' })
    runs.update(t.runs || [])
    replace(testsBody,
      h('p', badge(t.result || 'not_run'), ` ${t.passed || 0} passed · ${t.failed || 0} failed · ${t.errors || 0} errors · ${t.skipped || 0} skipped`),
      runs.el,
      (t.failed_tests || []).length ? h('ul.failed-tests', t.failed_tests.map((x) => h('li', h('strong', (x.classname ? x.classname + '.' : '') + x.name), x.message ? h('span.sub', ' ' + x.message.slice(0, 300)) : null))) : null,
      (t.reports || []).filter((r) => !r.counted).map((r) => h('p.sub', `Not counted: ${r.path} (${r.not_counted || r.error || 'not written by a test run'})`)))
  }

  function drawCommands(cmds) {
    const t = dataTable([
      { label: 'Time', cls: 'num', cell: (c) => time(c.started_at || c.at) },
      { label: 'Command', cell: (c) => h('code.cmd', c.command || c.id) },
      { label: 'Decision', cell: (c) => [c.decision ? badge(c.decision) : '—', c.approval ? h('span.sub', ' ' + c.approval) : null] },
      { label: 'Class', cell: (c) => c.class || '—' },
      { label: 'Exit', cls: 'num', cell: (c) => (c.exit_code !== undefined ? badge(String(c.exit_code), c.exit_code === 0 ? 'ok' : 'bad') : '—') },
      { label: 'Purpose', cell: (c) => c.purpose || '' },
    ], { key: (c) => c.id, caption: 'Commands', empty: 'No command was run.' })
    t.update(cmds.slice(-500))
    replace(cmdBody, t.el)
  }

  function drawNetwork(rows) {
    const t = dataTable([
      { label: 'Destination', cell: (e) => h('code', e.destination || `${e.host}:${e.port}`) },
      { label: 'Decision', cell: (e) => badge(e.decision || e.event) },
      { label: 'Reason', cell: (e) => e.reason || '' },
      { label: 'Traffic', cls: 'num', cell: (e) => (e.bytes_sent !== undefined ? `${bytes(e.bytes_sent)} / ${bytes(e.bytes_received)}` : '') },
    ], { key: (e) => JSON.stringify(e), caption: 'Egress', empty: 'No network connection was attempted.' })
    t.update(rows.slice(-300))
    replace(netBody, t.el)
  }

  function drawPackages(rows, deps) {
    const t = dataTable([
      { label: 'Package', cell: (p) => h('code', `${p.ecosystem ? p.ecosystem + ':' : ''}${p.name || p.path || '?'}${p.version ? '@' + p.version : ''}`) },
      { label: 'Decision', cell: (p) => (p.decision ? badge(p.decision) : '—') },
      { label: 'Rule / reason', cell: (p) => [p.rule, p.reason].filter(Boolean).join(' · ') },
      { label: 'Event', cell: (p) => p.event || p.type || '' },
    ], { key: (p) => JSON.stringify(p), caption: 'Package proxy records', empty: 'No package was fetched.' })
    t.update(rows.filter((p) => (p.event || p.type) !== 'package.metadata' || p.decision === 'deny').slice(-300))
    const d = deps.length ? h('ul.deps', deps.map((c) => h('li', badge(c.change, c.change === 'added' ? 'info' : c.change === 'removed' ? 'muted' : 'warn'), ' ', h('code', `${c.ecosystem}:${c.name}`), ` ${c.before || ''}${c.before && c.after ? ' → ' : ''}${c.after || ''}`, h('span.sub', ' in ' + c.file)))) : h('p.muted', 'No dependency change in the diff.')
    replace(pkgBody, t.el, h('h3', 'Dependency changes'), d)
  }

  loadInfo().then(() => loadBundle())
  return () => { alive = false }
}
