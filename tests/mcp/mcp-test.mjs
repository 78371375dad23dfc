// Airlock's MCP server driven by the official MCP SDK (pinned in
// tests/mcp/package.json): Streamable HTTP at /mcp and `airlock mcp` over
// stdio, with real VMs. Env: AIRLOCK_URL, ADMIN_KEY, AGENT_KEY and
// APPROVER_KEY (tenant acme), OTHER_KEY (tenant globex's agent), AIRLOCK_CLI.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import Ajv from 'ajv'

const { AIRLOCK_URL, ADMIN_KEY, AGENT_KEY, APPROVER_KEY, OTHER_KEY, AIRLOCK_CLI } = process.env
const MCP_URL = new URL('/mcp', AIRLOCK_URL)
const INFO = { name: 'airlock-test', version: '1.0.0' }
const clients = []
const connect = async (key) => {
  const transport = new StreamableHTTPClientTransport(MCP_URL, { requestInit: { headers: { Authorization: `Bearer ${key}` } } })
  const client = new Client(INFO, { capabilities: {} })
  await client.connect(transport, { timeout: 30_000 })
  clients.push(client)
  return { client, transport }
}
const call = (client, name, args, opts = {}) => client.callTool({ name, arguments: args }, undefined, { timeout: 180_000, ...opts })
const ok = (r) => {
  assert.ok(!r.isError, 'tool error: ' + JSON.stringify(r.content))
  assert.equal(typeof r.structuredContent, 'object')
  return r.structuredContent
}
const rest = async (key, method, path, body) => {
  const r = await fetch(new URL(path, AIRLOCK_URL), {
    method,
    headers: { Authorization: `Bearer ${key}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  })
  const text = await r.text()
  let json = null
  try { json = JSON.parse(text) } catch {}
  return { status: r.status, text, json }
}
const raw = (headers, body) => fetch(MCP_URL, {
  method: 'POST',
  headers: { Authorization: `Bearer ${AGENT_KEY}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
  body,
})
const waitFor = async (what, fn, ms = 20_000) => {
  const end = Date.now() + ms
  for (;;) {
    if (await fn()) return
    if (Date.now() > end) assert.fail('timed out waiting for ' + what)
    await new Promise((r) => setTimeout(r, 250))
  }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

let agent, sandbox
after(async () => {
  for (const c of clients) await c.close().catch(() => {})
  if (sandbox) await rest(ADMIN_KEY, 'DELETE', `/v1/sandboxes/${sandbox}`)
})

test('every tool an agent key lists has valid input and output JSON Schemas of type object, and no approval tool', async () => {
  agent = await connect(AGENT_KEY)
  assert.ok(agent.transport.sessionId, 'an Mcp-Session-Id')
  const caps = agent.client.getServerCapabilities()
  assert.ok(caps.tools && caps.resources)
  const { tools } = await agent.client.listTools()
  const names = tools.map((t) => t.name)
  for (const n of ['create_sandbox', 'list_sandboxes', 'delete_sandbox', 'run_command', 'wait_for_approval', 'start_process',
    'read_process_output', 'stop_process', 'read_file', 'write_file', 'list_files', 'expose_port', 'workspace_diff',
    'workspace_commit', 'request_push', 'seal_evidence', 'get_evidence_summary'])
    assert.ok(names.includes(n), n + ' is listed')
  assert.ok(!names.includes('decide_approval') && !names.includes('list_approvals'))
  const ajv = new Ajv({ strict: false })
  for (const t of tools) {
    assert.equal(t.inputSchema.type, 'object', t.name)
    assert.equal(t.outputSchema.type, 'object', t.name)
    ajv.compile(t.inputSchema)
    ajv.compile(t.outputSchema)
    assert.equal(typeof t.annotations.readOnlyHint, 'boolean', t.name)
  }
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]))
  assert.equal(byName.read_file.annotations.readOnlyHint, true)
  assert.equal(byName.delete_sandbox.annotations.destructiveHint, true)
  const approver = await connect(APPROVER_KEY)
  const approverTools = (await approver.client.listTools()).tools.map((t) => t.name)
  assert.ok(approverTools.includes('decide_approval') && approverTools.includes('list_approvals'))
  assert.ok(!approverTools.includes('run_command'), 'an approver never drives a sandbox')
})

test('create, run (shell and argv), a non-zero exit, files: each result matches its output schema', async () => {
  const created = ok(await call(agent.client, 'create_sandbox', { template: 'minimal', policy: { approve: ['git push*'] } }))
  sandbox = created.id
  assert.match(sandbox, /^sbx-/)
  assert.equal((await rest(AGENT_KEY, 'GET', `/v1/sandboxes/${sandbox}`)).status, 200)
  const hi = ok(await call(agent.client, 'run_command', { sandbox_id: sandbox, shell: 'echo hi-$((6*7))' }))
  assert.equal(hi.exit_code, 0)
  assert.equal(hi.stdout, 'hi-42\n')
  const argv = ok(await call(agent.client, 'run_command', { sandbox_id: sandbox, cmd: ['sh', '-c', 'echo "$0"', 'a b'] }))
  assert.equal(argv.stdout, 'a b\n')
  const three = await call(agent.client, 'run_command', { sandbox_id: sandbox, shell: 'echo oops >&2; exit 3' })
  assert.ok(!three.isError)
  assert.equal(three.structuredContent.exit_code, 3)
  assert.equal(three.structuredContent.stderr, 'oops\n')
  const body = 'line one\nünïcode ✓\n'
  ok(await call(agent.client, 'write_file', { sandbox_id: sandbox, path: '/tmp/mcp/t.txt', content: body }))
  assert.equal(ok(await call(agent.client, 'read_file', { sandbox_id: sandbox, path: '/tmp/mcp/t.txt' })).content, body)
  assert.ok(JSON.stringify(ok(await call(agent.client, 'list_files', { sandbox_id: sandbox, path: '/tmp/mcp' }))).includes('t.txt'))
  const missing = await call(agent.client, 'read_file', { sandbox_id: sandbox, path: '/tmp/mcp/none' })
  assert.ok(missing.isError)
  assert.match(missing.content[0].text, /not_found/)
})

test('another tenant\'s key finds nothing, and bad arguments are -32602 naming the argument', async () => {
  const other = await connect(OTHER_KEY)
  const r = await call(other.client, 'run_command', { sandbox_id: sandbox, shell: 'echo no' })
  assert.ok(r.isError)
  assert.match(r.content[0].text, /not_found/)
  await assert.rejects(call(agent.client, 'run_command', { sandbox_id: 42, shell: 'echo no' }),
    (e) => e.code === -32602 && /sandbox_id must be a string/.test(e.message))
  await assert.rejects(call(agent.client, 'run_command', { sandbox_id: sandbox, shell: 'x', sandbox: 'y' }),
    (e) => e.code === -32602 && /unknown argument sandbox/.test(e.message))
  await assert.rejects(call(agent.client, 'no_such_tool', {}), (e) => e.code === -32602)
  await assert.rejects(call(agent.client, 'decide_approval', { approval_id: 'apr-x', decision: 'approve' }),
    (e) => e.code === -32602 && /not offered/.test(e.message))
  await assert.rejects(agent.client.request({ method: 'prompts/list', params: {} }, (await import('@modelcontextprotocol/sdk/types.js')).ListPromptsResultSchema),
    (e) => e.code === -32601)
})

test('a held command answers pending_approval; approved through REST, wait_for_approval (with progress) returns its result', async () => {
  const held = ok(await call(agent.client, 'run_command', { sandbox_id: sandbox, shell: 'git push origin main; echo pushed-$((1+1))' }))
  assert.equal(held.state, 'pending_approval')
  assert.match(held.approval_id, /^apr-/)
  const progress = []
  const waiting = call(agent.client, 'wait_for_approval', { approval_id: held.approval_id },
    { onprogress: (p) => progress.push(p), resetTimeoutOnProgress: true })
  let done = false
  waiting.finally(() => { done = true })
  await sleep(2500)
  assert.equal(done, false, 'it waits for the decision')
  const approved = await rest(APPROVER_KEY, 'POST', `/v1/approvals/${held.approval_id}`, { decision: 'approve', reason: 'test' })
  assert.equal(approved.status, 200, approved.text)
  const result = ok(await waiting)
  assert.equal(typeof result.exit_code, 'number')
  assert.match(result.stdout, /pushed-2/)
  assert.ok(progress.length >= 1, 'progress while it waited')
})

test('progress arrives while a command runs, before its result', async () => {
  const seen = []
  const started = Date.now()
  const r = ok(await call(agent.client, 'run_command', { sandbox_id: sandbox, shell: 'sleep 3; echo done' },
    { onprogress: (p) => seen.push({ at: Date.now() - started, ...p }) }))
  const ended = Date.now() - started
  assert.equal(r.stdout, 'done\n')
  assert.ok(seen.length >= 1, 'notifications/progress')
  assert.ok(seen[0].at < ended - 500, `the first progress came at ${seen[0].at} ms, the result at ${ended} ms`)
  for (let i = 1; i < seen.length; i++) assert.ok(seen[i].progress > seen[i - 1].progress, 'increasing')
})

test('a cancelled command is killed in the guest and the cancel is audited', async () => {
  const ac = new AbortController()
  const long = call(agent.client, 'run_command', { sandbox_id: sandbox, shell: 'sleep 300; echo never' }, { signal: ac.signal })
  long.catch(() => {})
  const running = async () => ok(await call(agent.client, 'run_command', { sandbox_id: sandbox, shell: 'ps -eo args' })).stdout.includes('sleep 300')
  await waitFor('the long command in ps', running)
  ac.abort(new Error('test: cancel'))
  await assert.rejects(long)
  await waitFor('the long command gone', async () => !(await running()))
  const audit = await rest(AGENT_KEY, 'GET', `/v1/sandboxes/${sandbox}/audit?limit=1000`)
  assert.ok(audit.json.events.some((e) => e.type === 'exec.cancelled'), 'exec.cancelled is recorded')
})

test('resources: the audit log, templates, and an unknown URI', async () => {
  const { resources } = await agent.client.listResources()
  const audit = resources.find((r) => r.uri === `airlock://sandboxes/${sandbox}/audit`)
  assert.ok(audit, JSON.stringify(resources.map((r) => r.uri)))
  const read = await agent.client.readResource({ uri: audit.uri })
  assert.ok(read.contents[0].text.includes('hi-$((6*7))'))
  const { resourceTemplates } = await agent.client.listResourceTemplates()
  assert.ok(resourceTemplates.some((t) => t.uriTemplate.includes('{sandbox_id}')))
  await assert.rejects(agent.client.readResource({ uri: 'airlock://sandboxes/sbx-nope/audit' }), (e) => e.code === -32002)
  const other = await connect(OTHER_KEY)
  await assert.rejects(other.client.readResource({ uri: audit.uri }), (e) => e.code === -32002, 'another tenant\'s is not found')
})

test('the transport: Origin, malformed JSON, sessions', async () => {
  const init = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: INFO } })
  assert.equal((await raw({ Origin: 'http://evil.example' }, init)).status, 403)
  const fresh = await raw({}, init)
  assert.equal(fresh.status, 200)
  const session = fresh.headers.get('mcp-session-id')
  assert.match(session, /^[0-9a-f]{32}$/)
  assert.equal((await fresh.json()).result.protocolVersion, '2025-06-18', 'the version it asked for')
  const broken = await raw({ 'Mcp-Session-Id': session }, '{"jsonrpc":"2.0","id":7,"method":')
  assert.equal(broken.status, 400)
  assert.equal((await broken.json()).error.code, -32700)
  const ping = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' })
  assert.equal((await raw({}, ping)).status, 400, 'no session')
  assert.equal((await raw({ 'Mcp-Session-Id': 'f'.repeat(32) }, ping)).status, 404, 'an unknown session')
  const otherKey = await fetch(MCP_URL, { method: 'POST', headers: { Authorization: `Bearer ${OTHER_KEY}`, 'Content-Type': 'application/json', 'Mcp-Session-Id': session }, body: ping })
  assert.equal(otherKey.status, 404, 'another key\'s session is unknown to it')
  assert.equal((await raw({ 'Mcp-Session-Id': session }, ping)).status, 200)
  const ended = await fetch(MCP_URL, { method: 'DELETE', headers: { Authorization: `Bearer ${AGENT_KEY}`, 'Mcp-Session-Id': session } })
  assert.equal(ended.status, 204)
  assert.equal((await raw({ 'Mcp-Session-Id': session }, ping)).status, 404, 'ended')
  assert.equal((await fetch(MCP_URL, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: init })).status, 401)
})

test('stdio: airlock mcp offers the same tools to the same key and runs a command', async () => {
  const transport = new StdioClientTransport({ command: AIRLOCK_CLI, args: ['mcp'], env: { ...process.env, AIRLOCK_URL, AIRLOCK_API_KEY: AGENT_KEY }, stderr: 'pipe' })
  const client = new Client(INFO, { capabilities: {} })
  await client.connect(transport, { timeout: 30_000 })
  clients.push(client)
  const names = (await client.listTools()).tools.map((t) => t.name)
  assert.ok(names.includes('run_command') && !names.includes('decide_approval'))
  const r = ok(await call(client, 'run_command', { sandbox_id: sandbox, shell: 'echo stdio-$((40+2))' }))
  assert.equal(r.stdout, 'stdio-42\n')
  const seen = []
  const started = Date.now()
  ok(await call(client, 'run_command', { sandbox_id: sandbox, shell: 'sleep 3' }, { onprogress: (p) => seen.push(Date.now() - started) }))
  const ended = Date.now() - started
  assert.ok(seen.length >= 1 && seen[0] < ended - 500, `progress through the bridge as it comes (${seen} ms; the result at ${ended} ms)`)
})
