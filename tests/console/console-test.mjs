// The console (console/, served at /console/) in headless Chromium against a
// real airlockd with real VMs. Env: AIRLOCK_URL, ADMIN_KEY, AGENT_KEY and
// APPROVER_KEY (tenant acme), CHROMIUM, SHOTS (screenshots), CHROME_PROFILE,
// CHROME_PID_FILE, REPO_URL (a git repository anyone may read).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import puppeteer from 'puppeteer-core'

const require = createRequire(import.meta.url)
const AXE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8')
const { AIRLOCK_URL, AGENT_KEY, APPROVER_KEY, CHROMIUM, SHOTS, REPO_URL } = process.env
const BASE = AIRLOCK_URL.replace(/\/+$/, '')
const T = (id) => `[data-testid="${id}"]`
const created = []
let browser, page
const cspViolations = []

const rest = async (key, method, p, body, headers = {}) => {
  const r = await fetch(BASE + p, {
    method,
    headers: { ...(key ? { Authorization: `Bearer ${key}` } : {}), ...(body ? { 'Content-Type': 'application/json' } : {}), ...headers },
    body: body ? JSON.stringify(body) : undefined,
    redirect: 'manual',
  })
  const text = await r.text()
  let json = null
  try { json = JSON.parse(text) } catch {}
  return { status: r.status, text, json, headers: r.headers }
}
const until = async (what, fn, ms = 30_000) => {
  const end = Date.now() + ms
  for (;;) {
    const v = await fn()
    if (v) return v
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`)
    await new Promise((r) => setTimeout(r, 200))
  }
}
const sandbox = async (body) => {
  const r = await rest(AGENT_KEY, 'POST', '/v1/sandboxes', body)
  assert.equal(r.status, 201, r.text)
  created.push(r.json.id)
  return r.json.id
}
const visible = (sel, timeout = 15_000) => page.waitForSelector(sel, { visible: true, timeout })
const shown = (sel, timeout = 15_000) =>
  page.waitForFunction((s) => [...document.querySelectorAll(s)].some((e) => e.checkVisibility()), { timeout }, sel)
const route = (hash) => page.evaluate((h) => { location.hash = h }, hash)
const shot = (name) => page.screenshot({ path: path.join(SHOTS, name + '.png'), fullPage: true })
// axe-core, run through the DevTools protocol (the page's CSP allows no injected script)
const axe = async (name) => {
  if (!(await page.evaluate(() => typeof window.axe === 'object'))) await page.evaluate(AXE + '\n;void 0')
  const violations = await page.evaluate(async () => (await window.axe.run(document, { resultTypes: ['violations'] })).violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.impact} ${v.id} ${JSON.stringify(v.nodes[0]?.target)}`))
  assert.deepEqual(violations, [], `axe-core on the ${name} page`)
}
const terminalText = () => page.evaluate((s) => {
  const el = document.querySelector(s)
  return (el?.querySelector('.xterm-rows') ?? el)?.textContent || ''
}, T('terminal'))
const signIn = async (key) => {
  await visible(T('key-input'))
  await page.$eval(T('key-input'), (e) => { e.value = '' })
  await page.type(T('key-input'), key)
  await page.keyboard.press('Enter')
  await visible(T('sign-out'))
}
const sessionCookie = async () => (await page.cookies(BASE)).find((c) => c.name === 'airlock_session')

before(async () => {
  fs.mkdirSync(SHOTS, { recursive: true })
  browser = await puppeteer.launch({
    executablePath: CHROMIUM, headless: true, userDataDir: process.env.CHROME_PROFILE, protocolTimeout: 120_000,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'],
  })
  if (process.env.CHROME_PID_FILE) fs.writeFileSync(process.env.CHROME_PID_FILE, String(browser.process()?.pid ?? ''))
  page = await browser.newPage()
  await page.setViewport({ width: 1280, height: 860 })
  await page.evaluateOnNewDocument(() => {
    document.addEventListener('securitypolicyviolation', (e) => console.error(`CSP-VIOLATION ${e.violatedDirective}`))
  })
  page.on('console', (m) => { if (m.text().startsWith('CSP-VIOLATION')) cspViolations.push(m.text()) })
  page.on('dialog', (d) => d.accept('from the console test').catch(() => {}))
})

after(async () => {
  for (const id of created) await rest(AGENT_KEY, 'DELETE', `/v1/sandboxes/${id}`).catch(() => {})
  await browser?.close().catch(() => browser.process()?.kill('SIGKILL'))
})

test('the page is served under a strict policy and an approver signs in', async () => {
  const home = await rest(null, 'GET', '/console/')
  assert.equal(home.status, 200)
  const csp = home.headers.get('content-security-policy')
  assert.match(csp, /script-src 'self';/)
  assert.doesNotMatch(csp, /unsafe|https?:/)
  await page.goto(BASE + '/console/', { waitUntil: 'domcontentloaded' })
  await shot('sign-in')
  await signIn(APPROVER_KEY)
  const cookie = await sessionCookie()
  assert.ok(cookie, 'a session cookie')
  assert.equal(cookie.httpOnly, true)
  assert.equal(cookie.sameSite, 'Strict')
  assert.equal((await rest(null, 'GET', '/v1/approvals', null, { Cookie: `airlock_session=${cookie.value}` })).status, 200)
})

test('a sandbox made through the API appears in the list without a reload', async () => {
  await route('#/sandboxes')
  await shown(T('sandbox-list'))
  await page.evaluate(() => { window.__kept = true })
  const id = await sandbox({ template: 'minimal' })
  await visible(`${T('sandbox-row')}[data-sandbox-id="${id}"]`)
  assert.equal(await page.evaluate(() => window.__kept), true, 'no reload')
  await axe('sandboxes')
  await shot('sandboxes')
})

test("in a sandbox's terminal, a typed command's output shows", async () => {
  const id = created[0]
  await page.click(`${T('sandbox-row')}[data-sandbox-id="${id}"] a`)
  const term = await visible(T('terminal'))
  assert.equal(await page.evaluate(() => location.hash), `#/sandboxes/${id}`)
  await term.click()
  await until('a prompt', async () => (await terminalText()).trim().length > 0, 20_000)
  await page.keyboard.type('echo hi-$((6*7))')
  await page.keyboard.press('Enter')
  await until('hi-42 in the terminal', async () => (await terminalText()).includes('hi-42'), 20_000)
  // Typed by the approver's key, and audited under it: the shell, and each line judged by the policy.
  await until('the shell and the line in the audit', async () => {
    const events = (await rest(AGENT_KEY, 'GET', `/v1/sandboxes/${id}/audit`)).json?.events ?? []
    const byApprover = (e) => /console-approver, approver/.test(e.data?.by ?? '')
    return events.some((e) => e.type === 'exec.allowed' && byApprover(e)) &&
      events.some((e) => e.type === 'exec.line' && byApprover(e) && e.data?.command === 'echo hi-$((6*7))' && e.data?.policy?.decision === 'allow')
  })
  await axe('sandbox')
  await shot('sandbox')
})

test('a gated command appears in the inbox live, is approved there, and its caller gets the result', async () => {
  await route('#/approvals')
  await shown(T('approvals-inbox'))
  const id = await sandbox({ template: 'minimal', policy: { approve: ['echo gated*'] } })
  const ex = await rest(AGENT_KEY, 'POST', `/v1/sandboxes/${id}/exec`, { shell: 'echo gated-$((40+2))' })
  assert.equal(ex.status, 202, ex.text)
  const item = await visible(`${T('approval-item')}[data-approval-id="${ex.json.approval_id}"]`)
  await page.waitForFunction(() => /\(1\)/.test(document.title), { timeout: 10_000 })
  await axe('approvals')
  await shot('approvals')
  await (await item.$(T('approve-button'))).click()
  const done = await until('the exec to end', async () => {
    const r = await rest(AGENT_KEY, 'GET', `/v1/sandboxes/${id}/execs/${ex.json.exec_id}`)
    return ['exited', 'completed', 'done', 'succeeded'].includes(r.json?.state) || r.json?.exit_code === 0 ? r.json : null
  })
  assert.match(JSON.stringify(done), /gated-42/)
})

test('GET /v1/events streams the audit and resumes after Last-Event-ID', async () => {
  const id = created[0]
  const read = async (headers) => {
    const ctl = new AbortController()
    const r = await fetch(BASE + '/v1/events', { headers: { Authorization: `Bearer ${AGENT_KEY}`, ...headers }, signal: ctl.signal })
    assert.equal(r.status, 200)
    assert.match(r.headers.get('content-type'), /text\/event-stream/)
    return { reader: r.body.getReader(), ctl }
  }
  const { reader, ctl } = await read({ 'Last-Event-ID': '0' })
  let text = ''
  const dec = new TextDecoder()
  await until('a sandbox.created event', async () => {
    const { value } = await reader.read()
    text += dec.decode(value)
    return text.includes(`"sandbox":"${id}"`) && text.includes('event: sandbox.created')
  })
  ctl.abort()
  const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]))
  assert.ok(ids.length > 1 && ids.every((v, i) => i === 0 || v > ids[i - 1]), 'ordered ids')
  const again = await read({ 'Last-Event-ID': String(ids[0]) })
  let second = ''
  await until('the resumed stream', async () => {
    const { value } = await again.reader.read()
    second += dec.decode(value)
    return /^id: \d+$/m.test(second)
  })
  again.ctl.abort()
  assert.equal(Number(second.match(/^id: (\d+)$/m)[1]), ids[1], 'it resumes right after the id given')
  assert.equal((await rest(null, 'GET', '/v1/events')).status, 401)
})

test("a sandbox's review page shows a line of its workspace diff", async () => {
  const id = await sandbox({ template: 'minimal', workspace: { repo: REPO_URL, ref: 'main', branch: 'agent/console', path: '/workspace' } })
  const w = await rest(AGENT_KEY, 'POST', `/v1/sandboxes/${id}/exec`, { shell: "echo '    # console-review-line' >> /workspace/app.py" })
  assert.equal(w.status, 200, w.text)
  const ev = await rest(AGENT_KEY, 'POST', `/v1/sandboxes/${id}/evidence`, {})
  assert.equal(ev.status, 201, ev.text)
  await route(`#/evidence/${ev.json.id}`)
  await shown(T('review-diff'))
  await page.waitForFunction((s) => document.querySelector(s)?.textContent.includes('console-review-line'), { timeout: 20_000 }, T('review-diff'))
  await axe('review')
  await shot('review')
})

test('the admin page lists tenants and keys', async () => {
  await page.click(T('sign-out'))
  await signIn(process.env.ADMIN_KEY)
  await route('#/admin')
  await page.waitForFunction(() => document.body.textContent.includes('console-agent'), { timeout: 15_000 })
  await axe('admin')
  await shot('admin')
})

test('a cross-site change with the session cookie is refused', async () => {
  const cookie = await sessionCookie()
  const current = await page.evaluate(async () => (await fetch('/v1/sessions/current')).json())
  const post = (headers) => rest(null, 'POST', '/v1/sandboxes', { template: 'minimal' }, { Cookie: `airlock_session=${cookie.value}`, ...headers })
  assert.equal((await post({ Origin: 'http://evil.example', 'X-CSRF-Token': current.csrf_token })).status, 403)
  assert.equal((await post({ Origin: BASE })).status, 403, 'no token')
})

test('an agent signs in, sees no approve button, and its approval is refused', async () => {
  await page.click(T('sign-out'))
  await signIn(AGENT_KEY)
  const id = created[1]
  const ex = await rest(AGENT_KEY, 'POST', `/v1/sandboxes/${id}/exec`, { shell: 'echo gated-again' })
  assert.equal(ex.status, 202, ex.text)
  await route('#/approvals')
  await shown(T('approvals-inbox'))
  assert.equal((await page.$$(T('approve-button'))).length, 0)
  const tried = await page.evaluate(async (apr) => {
    const me = await (await fetch('/v1/sessions/current')).json()
    const r = await fetch('/v1/approvals/' + apr, { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': me.csrf_token }, body: JSON.stringify({ decision: 'approve', reason: 'self' }) })
    return r.status
  }, ex.json.approval_id)
  assert.equal(tried, 403)
  const still = await rest(APPROVER_KEY, 'GET', '/v1/approvals')
  assert.ok(still.json.approvals.some((a) => a.id === ex.json.approval_id), 'still pending')
  assert.deepEqual(cspViolations, [], 'no CSP violation on any page')
})
