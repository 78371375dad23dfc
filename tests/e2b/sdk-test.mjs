// Airlock's E2B front door driven by the unmodified e2b SDK (public API only).
// Env: E2B_API_KEY, E2B_API_URL, E2B_SANDBOX_URL, E2B_SDK (the package to load:
// "e2b" is 2.51 on the v2 routes, "e2b-v1routes" an older 2.x on the v1 routes),
// AIRLOCK_URL and AIRLOCK_ADMIN_KEY (to check approvals natively).
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'

const { Sandbox, CommandExitError } = await import(process.env.E2B_SDK || 'e2b')
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const until = async (what, fn, ms = 10_000) => {
  const end = Date.now() + ms
  for (;;) {
    if (await fn()) return
    if (Date.now() > end) assert.fail('timed out waiting for ' + what)
    await sleep(100)
  }
}
const tag = 'sdk-' + process.pid + '-' + Date.now()
const sbx = await Sandbox.create('base', { timeoutMs: 300_000, metadata: { suite: tag }, envs: { FROM_CREATE: 'yes' } })
after(async () => { try { await sbx.kill() } catch {} })

test('commands.run streams stdout and stderr as they come and returns the result', async () => {
  const out = [], err = []
  const r = await sbx.commands.run('echo one; echo two 1>&2; sleep 0.3; echo three', {
    onStdout: (d) => out.push(d), onStderr: (d) => err.push(d),
  })
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'one\nthree\n')
  assert.equal(r.stderr, 'two\n')
  assert.ok(out.length >= 2, 'stdout arrived in more than one event: ' + JSON.stringify(out))
  assert.equal(err.join(''), 'two\n')
})

test('env vars from create and per command; user and home', async () => {
  assert.equal((await sbx.commands.run('echo $FROM_CREATE-$PER_CMD', { envs: { PER_CMD: 'cmd' } })).stdout.trim(), 'yes-cmd')
  const who = await sbx.commands.run('whoami; pwd')
  assert.equal(who.stdout, 'user\n/home/user\n')
  assert.equal((await sbx.commands.run('whoami', { user: 'root' })).stdout.trim(), 'root')
  assert.equal((await sbx.commands.run('pwd', { cwd: '/tmp' })).stdout.trim(), '/tmp')
})

test('base as E2B has it: sudo without a password for user, and the usual tools', async () => {
  const r = await sbx.commands.run('sudo echo "$FOO"; sudo id -u; sudo -n true && echo nopasswd', { envs: { FOO: 'bar' } })
  assert.equal(r.stdout, 'bar\n0\nnopasswd\n')
  for (const tool of ['git', 'python3', 'pip', 'node', 'npm', 'curl', 'wget', 'jq', 'zip', 'unzip', 'gcc', 'make'])
    assert.equal((await sbx.commands.run('command -v ' + tool)).exitCode, 0, tool)
})

test('a non-zero exit is a CommandExitError with its code and output', async () => {
  await assert.rejects(sbx.commands.run('echo partial; exit 7'), (e) => {
    assert.ok(e instanceof CommandExitError)
    assert.equal(e.exitCode, 7)
    assert.equal(e.stdout, 'partial\n')
    return true
  })
})

test('a background command is listed, reads stdin and dies on kill', async () => {
  const h = await sbx.commands.run('cat', { background: true, timeoutMs: 0, stdin: true })
  assert.ok(h.pid > 0)
  assert.ok((await sbx.commands.list()).some((p) => p.pid === h.pid && p.cmd === '/bin/bash'))
  await sbx.commands.sendStdin(h.pid, 'echoed-back\n')
  await until('stdin echoed', () => h.stdout.includes('echoed-back'))
  assert.equal(await h.kill(), true)
  await assert.rejects(h.wait())
  await until('gone from the list', async () => !(await sbx.commands.list()).some((p) => p.pid === h.pid))
  assert.equal(await sbx.commands.kill(h.pid), false)
})

test('timeoutMs bounds the command: a TimeoutError, and the process is gone', async () => {
  const started = Date.now()
  await assert.rejects(sbx.commands.run('sleep 30; echo never', { timeoutMs: 2000 }), (e) => e.name === 'TimeoutError')
  assert.ok(Date.now() - started < 15_000)
  await until('the process gone', async () => !(await sbx.commands.list()).some((p) => p.args.join(' ').includes('sleep 30')))
})

test('a background command outlives its client and can be connected to again', async () => {
  const h = await sbx.commands.run('for i in 1 2 3 4 5 6; do echo tick$i; sleep 0.5; done', { background: true, timeoutMs: 0 })
  await h.disconnect()
  const again = await sbx.commands.connect(h.pid)
  const r = await again.wait()
  assert.equal(r.exitCode, 0)
  assert.ok(r.stdout.includes('tick6'), r.stdout)
})

test('files: write, read, bytes, exists, getInfo, list, makeDir, rename, remove', async () => {
  const info = await sbx.files.write('/home/user/dir/a.txt', 'hello e2b')
  assert.equal(info.path, '/home/user/dir/a.txt')
  assert.equal(await sbx.files.read('/home/user/dir/a.txt'), 'hello e2b')
  assert.equal((await sbx.commands.run('stat -c %U /home/user/dir/a.txt')).stdout.trim(), 'user')
  const bytes = new Uint8Array(300_000).map((_, i) => (i * 13) & 255)
  await sbx.files.write('/home/user/blob.bin', bytes.buffer)
  const back = await sbx.files.read('/home/user/blob.bin', { format: 'bytes' })
  assert.equal(back.length, bytes.length)
  assert.ok(back.every((v, i) => v === bytes[i]))
  assert.equal(await sbx.files.exists('/home/user/dir/a.txt'), true)
  assert.equal(await sbx.files.exists('/home/user/nope'), false)
  const st = await sbx.files.getInfo('/home/user/dir/a.txt')
  assert.equal(st.size, 9)
  assert.equal(st.type, 'file')
  assert.equal(await sbx.files.makeDir('/home/user/d2/sub'), true)
  assert.equal(await sbx.files.makeDir('/home/user/d2/sub'), false)
  await sbx.files.rename('/home/user/dir/a.txt', '/home/user/d2/b.txt')
  assert.deepEqual((await sbx.files.list('/home/user/d2')).map((e) => e.name).sort(), ['b.txt', 'sub'])
  assert.ok((await sbx.files.list('/home/user/d2', { depth: 2 })).length >= 2)
  await assert.rejects(sbx.files.read('/home/user/dir/a.txt'))
  await sbx.files.remove('/home/user/d2')
  assert.equal(await sbx.files.exists('/home/user/d2'), false)
})

test('watchDir reports a file created in the directory', async () => {
  const events = []
  const w = await sbx.files.watchDir('/home/user', (e) => events.push(e))
  await sbx.files.write('/home/user/watched.txt', 'x')
  await until('a watch event', () => events.some((e) => e.name === 'watched.txt'))
  await w.stop()
})

test('pty: create, input, resize', async () => {
  let data = ''
  const h = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { data += new TextDecoder().decode(d) } })
  await sbx.pty.sendInput(h.pid, new TextEncoder().encode('stty size; echo pty-$((40+2))\n'))
  await until('pty output', () => data.includes('pty-42') && data.includes('24 80'))
  await sbx.pty.resize(h.pid, { cols: 100, rows: 30 })
  await sbx.pty.sendInput(h.pid, new TextEncoder().encode('stty size\n'))
  await until('resized', () => data.includes('30 100'))
  await h.kill()
})

test('policy: a gated command names its approval, a denied one the policy', async () => {
  await assert.rejects(sbx.commands.run('npm install left-pad'), (e) => /apr-[a-z0-9]+/.test(e.message))
  const approvals = await (await fetch(process.env.AIRLOCK_URL + '/v1/approvals', {
    headers: { Authorization: 'Bearer ' + process.env.AIRLOCK_ADMIN_KEY } })).json()
  assert.ok(JSON.stringify(approvals).includes('npm install left-pad'))
  await assert.rejects(sbx.commands.run('rm -rf /'), (e) => /denied|polic/i.test(e.message))
})

test('setTimeout, getInfo and list with a metadata filter', async () => {
  await sbx.setTimeout(600_000)
  const info = await sbx.getInfo()
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.ok(info.endAt.getTime() - Date.now() > 500_000)
  assert.deepEqual(info.metadata, { suite: tag })
  const items = await Sandbox.list({ query: { metadata: { suite: tag } } }).nextItems()
  assert.deepEqual(items.map((s) => s.sandboxId), [sbx.sandboxId])
})

test('list pages come newest first, and a page token outlives its sandbox', async () => {
  const order = tag + '-order'
  const first = await Sandbox.create('base', { timeoutMs: 120_000, metadata: { suite: order } })
  const second = await Sandbox.create('base', { timeoutMs: 120_000, metadata: { suite: order } })
  try {
    const pages = Sandbox.list({ query: { metadata: { suite: order } }, limit: 1 })
    const one = await pages.nextItems()
    assert.deepEqual(one.map((s) => s.sandboxId), [second.sandboxId], 'the one started last comes first')
    assert.ok(pages.hasNext)
    await second.kill()
    const two = await pages.nextItems()
    assert.deepEqual(two.map((s) => s.sandboxId), [first.sandboxId])
    assert.equal(pages.hasNext, false, 'no token after a full last page')
  } finally {
    for (const s of [first, second]) { try { await s.kill() } catch {} }
  }
})

test('getHost reaches a guest port through Host routing', async () => {
  await sbx.commands.run('mkdir -p /tmp/www && echo served-by-guest > /tmp/www/index.html')
  await sbx.commands.run('cd /tmp/www && python3 -m http.server 8000', { background: true, timeoutMs: 0 })
  const url = new URL(process.env.E2B_API_URL)
  assert.equal(sbx.getHost(8000), `8000-${sbx.sandboxId}.localhost`)
  // node:http, not fetch: fetch drops a Host header (a forbidden header name).
  const get = (headers) => new Promise((resolve) => {
    http.get({ host: url.hostname, port: url.port, path: '/', headers }, (res) => {
      let body = ''
      res.on('data', (d) => { body += d })
      res.on('end', () => resolve({ status: res.statusCode, body }))
    }).on('error', () => resolve({ status: 0, body: '' }))
  })
  await until('the guest server', async () => (await get({ Host: sbx.getHost(8000) })).body.includes('served-by-guest'), 20_000)
  // The routing headers reach it too; a closed port is a 502, not the API.
  assert.ok((await get({ 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '8000' })).body.includes('served-by-guest'))
  assert.equal((await get({ Host: sbx.getHost(8001) })).status, 502)
  assert.equal((await get({ Host: `8000-sbx-nosuchsandbox0000.localhost` })).status, 502)
})

test('pause, then connect resumes it with its files', async () => {
  await sbx.files.write('/home/user/keep.txt', 'kept')
  await sbx.pause()
  assert.equal(await sbx.isRunning(), false)
  const again = await Sandbox.connect(sbx.sandboxId)
  assert.equal(await again.isRunning(), true)
  assert.equal(await again.files.read('/home/user/keep.txt'), 'kept')
})

test('a sandbox killed during a command ends the command with an error', async () => {
  const other = await Sandbox.create('base', { timeoutMs: 120_000 })
  const h = await other.commands.run('sleep 60', { background: true, timeoutMs: 0 })
  await Sandbox.kill(other.sandboxId)
  // E2B's words: the stream is cut and the SDK's health probe answers 502.
  await assert.rejects(h.wait(), (e) => /sandbox was killed or reached its end of life/.test(e.message))
  assert.equal(await other.isRunning(), false)
  assert.equal(await Sandbox.kill(other.sandboxId), false)
})

test('mcp at create: the error E2B gives when no gateway can start, and no sandbox left', async () => {
  const before = (await Sandbox.list({ query: { metadata: { suite: tag + '-mcp' } } }).nextItems()).length
  await assert.rejects(Sandbox.create('base', { mcp: { exa: { apiKey: 'k' } }, metadata: { suite: tag + '-mcp' } }),
    (e) => /Failed to start MCP gateway/.test(e.message))
  assert.equal(before, 0)
  assert.equal((await Sandbox.list({ query: { metadata: { suite: tag + '-mcp' } } }).nextItems()).length, 0)
})

test('an unknown route answers E2B\'s error shape', async () => {
  const r = await fetch(process.env.E2B_API_URL + '/v3/no-such-thing', { headers: { 'X-API-KEY': process.env.E2B_API_KEY } })
  assert.equal(r.status, 404)
  const body = await r.json()
  assert.equal(body.code, 404)
  assert.equal(typeof body.message, 'string')
})
