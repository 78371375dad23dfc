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
// Requests every SDK version sends alike run once, with the newest (a short suite).
const newest = !process.env.E2B_SDK || process.env.E2B_SDK === 'e2b'
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

test('several files in one write go where envd puts them, outside home too, and are the user\'s', async () => {
  const files = [{ path: `/0/multi-${tag}.txt`, data: 'zero' }, { path: '/home/user/multi-1.txt', data: 'one' },
    { path: `/opt/made/for/multi-${tag}.txt`, data: 'two' }]
  const infos = await sbx.files.write(files)
  assert.equal(infos.length, files.length)
  for (let i = 0; i < files.length; i++) {
    assert.equal(infos[i].path, files[i].path)
    assert.equal(await sbx.files.read(files[i].path), files[i].data)
  }
  const owners = await sbx.commands.run(`stat -c %U /0/multi-${tag}.txt /opt/made /opt/made/for/multi-${tag}.txt /opt`)
  assert.equal(owners.stdout, 'user\nuser\nuser\nroot\n', 'written as envd writes: the user\'s, with the directories made for it')
})

test('file metadata: written with the file, read back by getInfo, list and rename, cleared by an overwrite', async () => {
  const metadata = { author: 'mish', purpose: 'upload' }
  const info = await sbx.files.write('meta/a.txt', 'with metadata', { metadata })
  assert.deepEqual(info.metadata, metadata)
  assert.deepEqual((await sbx.files.getInfo('meta/a.txt')).metadata, metadata)
  const octet = await sbx.files.write('meta/b.txt', 'octets', { metadata, useOctetStream: true })
  assert.deepEqual(octet.metadata, metadata)
  const several = await sbx.files.write([{ path: 'meta/c.txt', data: 'c' }, { path: 'meta/d.txt', data: 'd' }], { metadata: { source: 'suite' } })
  assert.equal(several.length, 2)
  for (const f of several) {
    assert.deepEqual(f.metadata, { source: 'suite' })
    assert.deepEqual((await sbx.files.getInfo(f.path)).metadata, { source: 'suite' })
  }
  const listed = (await sbx.files.list('meta')).find((e) => e.name === 'a.txt')
  assert.deepEqual(listed.metadata, metadata)
  assert.deepEqual((await sbx.files.rename('meta/a.txt', 'meta/moved.txt')).metadata, metadata)
  const plain = await sbx.files.write('meta/moved.txt', 'again, without')
  assert.equal(plain.metadata, undefined, 'an overwrite replaces the whole set')
  assert.equal((await sbx.files.getInfo('meta/moved.txt')).metadata, undefined)
  // Set in the guest by any tool: surfaced too.
  await sbx.commands.run(`python3 -c "import os; os.setxattr('/home/user/meta/b.txt', 'user.e2b.extra', b'set-inside')"`)
  assert.deepEqual((await sbx.files.getInfo('meta/b.txt')).metadata, { ...metadata, extra: 'set-inside' })
})

test('gzip: uploads the SDK compresses, one file or several, and compressed reads', async () => {
  const text = 'squeeze me '.repeat(50_000)
  const info = await sbx.files.write('/home/user/gz/one.txt', text, { gzip: true })
  assert.equal(info.path, '/home/user/gz/one.txt')
  const bytes = new Uint8Array(400_000).map((_, i) => (i * 31) & 255)
  await sbx.files.write([{ path: '/home/user/gz/a.bin', data: bytes.buffer }, { path: '/home/user/gz/b.txt', data: 'b' }],
    { gzip: true })
  assert.equal((await sbx.commands.run('wc -c < /home/user/gz/one.txt; wc -c < /home/user/gz/a.bin; cat /home/user/gz/b.txt')).stdout,
    `${text.length}\n400000\nb`)
  assert.equal(await sbx.files.read('/home/user/gz/one.txt', { gzip: true }), text)
  const back = await sbx.files.read('/home/user/gz/a.bin', { format: 'bytes', gzip: true })
  assert.ok(back.length === bytes.length && back.every((v, i) => v === bytes[i]))
  // On the wire: the body is gzip when asked for, identity when not; a body
  // that is not gzip is refused.
  const envd = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983', 'X-Access-Token': sbx.envdAccessToken ?? '' }
  const files = process.env.E2B_SANDBOX_URL + '/files?path='
  const raw = await new Promise((resolve, reject) => http.get(files + '/home/user/gz/one.txt', { headers: { ...envd, 'Accept-Encoding': 'gzip' } },
    (res) => { const c = []; res.on('data', (d) => c.push(d)); res.on('end', () => resolve({ res, body: Buffer.concat(c) })) }).on('error', reject))
  assert.equal(raw.res.statusCode, 200)
  assert.equal(raw.res.headers['content-encoding'], 'gzip')
  assert.ok(raw.body.length < text.length / 10, 'compressed: ' + raw.body.length)
  const plain = await new Promise((resolve, reject) => http.get(files + '/home/user/gz/b.txt', { headers: envd },
    (res) => { const c = []; res.on('data', (d) => c.push(d)); res.on('end', () => resolve({ res, body: Buffer.concat(c) })) }).on('error', reject))
  assert.equal(plain.res.headers['content-encoding'], undefined)
  assert.equal(plain.body.toString(), 'b')
  const bad = await fetch(files + '/home/user/gz/bad.txt', { method: 'POST', body: 'not gzip at all',
    headers: { ...envd, 'Content-Type': 'application/octet-stream', 'Content-Encoding': 'gzip' } })
  assert.equal(bad.status, 400)
})

test('polled watchers (the Python sync SDK\'s CreateWatcher, GetWatcherEvents, RemoveWatcher)', async () => {
  const rpc = async (method, body) => {
    const r = await fetch(process.env.E2B_SANDBOX_URL + '/filesystem.Filesystem/' + method, { method: 'POST', body: JSON.stringify(body),
      headers: { 'Content-Type': 'application/json', 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983',
        'X-Access-Token': sbx.envdAccessToken ?? '' } })
    return { status: r.status, body: await r.json() }
  }
  await sbx.commands.run('mkdir -p /home/user/pw')
  const created = await rpc('CreateWatcher', { path: '/home/user/pw', recursive: true })
  assert.equal(created.status, 200)
  const id = created.body.watcherId
  assert.match(id, /^w[a-z0-9]{20}$/)
  await sbx.commands.run('mkdir -p /home/user/pw/sub && echo p > /home/user/pw/sub/p.txt')
  let names = []
  await until('polled events', async () => {
    const got = await rpc('GetWatcherEvents', { watcherId: id })
    names = names.concat((got.body.events ?? []).map((e) => e.type + ' ' + e.name))
    return names.includes('EVENT_TYPE_CREATE sub/p.txt')
  })
  assert.deepEqual((await rpc('GetWatcherEvents', { watcherId: id })).body, {})
  assert.deepEqual(await rpc('RemoveWatcher', { watcherId: id }), { status: 200, body: {} })
  const gone = await rpc('GetWatcherEvents', { watcherId: id })
  assert.equal(gone.status, 404)
  assert.equal(gone.body.code, 'not_found')
})

test('signed URLs: a download and an upload with no token, bound to what they sign', async () => {
  await sbx.files.write('/home/user/signed.txt', 'signed content')
  const api = new URL(process.env.E2B_API_URL)
  // As a browser with wildcard DNS would send it: the envd host, no token header.
  const send = (signedUrl, method = 'GET', body) => new Promise((resolve) => {
    const u = new URL(signedUrl)
    const req = http.request({ host: api.hostname, port: api.port, method, path: u.pathname + u.search,
      headers: { Host: sbx.getHost(49983), ...(body ? { 'Content-Type': 'application/octet-stream' } : {}) } }, (res) => {
      let text = ''
      res.on('data', (d) => { text += d })
      res.on('end', () => resolve({ status: res.statusCode, text }))
    })
    req.on('error', () => resolve({ status: 0, text: '' }))
    req.end(body)
  })
  const down = await sbx.downloadUrl('/home/user/signed.txt', { useSignatureExpiration: 60 })
  assert.match(down, /signature=v1_/)
  assert.deepEqual(await send(down), { status: 200, text: 'signed content' })
  const up = await sbx.uploadUrl('/home/user/uploaded.txt')
  assert.equal((await send(up, 'POST', 'via signed url')).status, 200)
  assert.equal(await sbx.files.read('/home/user/uploaded.txt'), 'via signed url')
  // Another path, a missing signature, an expired one: 401 with envd's words.
  const moved = new URL(down)
  moved.searchParams.set('path', '/home/user/uploaded.txt')
  const bad = await send(moved.toString())
  assert.equal(bad.status, 401)
  assert.match(bad.text, /invalid signature/)
  const bare = new URL(down)
  bare.searchParams.delete('signature')
  assert.match((await send(bare.toString())).text, /missing signature/)
  // A signed URL runs as the user it signed, whatever else the request says.
  await sbx.commands.run('echo root-only > /root/only-root && chmod 600 /root/only-root', { user: 'root' })
  const rootFile = new URL(await sbx.downloadUrl('/root/only-root'))
  const asRoot = await new Promise((resolve) => {
    http.get({ host: api.hostname, port: api.port, path: rootFile.pathname + rootFile.search,
      headers: { Host: sbx.getHost(49983), Authorization: 'Basic ' + Buffer.from('root:').toString('base64') } },
    (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)) }).on('error', () => resolve(0))
  })
  assert.notEqual(asRoot, 200)
  const expired = await sbx.downloadUrl('/home/user/signed.txt', { useSignatureExpiration: -10 })
  assert.match((await send(expired)).text, /signature is already expired/)
  // One URL for every sandbox (E2B_SANDBOX_URL), as the SDK hands the URL
  // out: no Host naming the sandbox, no header; the signature names it.
  assert.ok(down.startsWith(process.env.E2B_SANDBOX_URL), down)
  const direct = await fetch(down)
  assert.deepEqual([direct.status, await direct.text()], [200, 'signed content'])
  const upDirect = await fetch(await sbx.uploadUrl('/home/user/direct.txt'), { method: 'POST', body: 'direct', headers: { 'Content-Type': 'application/octet-stream' } })
  assert.equal(upDirect.status, 200)
  assert.equal(await sbx.files.read('/home/user/direct.txt'), 'direct')
  assert.equal((await fetch(moved)).status, 401)
  const unnamed = await fetch(bare)
  assert.equal(unnamed.status, 400)
  assert.match((await unnamed.json()).message, /names its sandbox/)
})

test('symlinks: getInfo and list give the target\'s type and the resolved target', async () => {
  await sbx.commands.run('mkdir -p /home/user/ln/sub && echo hi > /home/user/ln/real.txt && ' +
    'ln -s real.txt /home/user/ln/hop && ln -s hop /home/user/ln/link && ln -s sub /home/user/ln/dirlink && ' +
    'ln -s nowhere /home/user/ln/broken')
  const info = await sbx.files.getInfo('/home/user/ln/link')
  assert.equal(info.type, 'file')
  assert.equal(info.path, '/home/user/ln/link')
  assert.equal(info.symlinkTarget, '/home/user/ln/real.txt')
  assert.equal(info.size, 3, 'the link\'s own size')
  assert.ok(info.permissions.startsWith('L'), info.permissions)
  const dir = await sbx.files.getInfo('/home/user/ln/dirlink')
  assert.equal(dir.type, 'dir')
  assert.equal(dir.symlinkTarget, '/home/user/ln/sub')
  const broken = await sbx.files.getInfo('/home/user/ln/broken')
  assert.equal(broken.symlinkTarget, '/home/user/ln/broken')
  const listed = Object.fromEntries((await sbx.files.list('/home/user/ln')).map((e) => [e.name, e]))
  assert.equal(listed.link.type, 'file')
  assert.equal(listed.dirlink.type, 'dir')
  assert.equal(listed.link.symlinkTarget, '/home/user/ln/real.txt')
  assert.equal(await sbx.files.read('/home/user/ln/link'), 'hi\n')
})

test('watchDir: recursive into folders made after the start, with entries; refusals', async () => {
  const events = []
  await sbx.commands.run('rm -rf /home/user/w && mkdir -p /home/user/w/old')
  const w = await sbx.files.watchDir('/home/user/w', (e) => events.push(e), { recursive: true, includeEntry: true })
  const seen = (type, name) => events.some((e) => e.type === type && e.name === name)
  await sbx.files.write('/home/user/w/watched.txt', 'x')
  await until('a create and a write', () => seen('create', 'watched.txt') && seen('write', 'watched.txt'))
  const written = events.find((e) => e.type === 'write' && e.name === 'watched.txt')
  assert.equal(written.entry?.type, 'file')
  assert.equal(written.entry?.path, '/home/user/w/watched.txt')
  // A folder made after the watch started, and filled at once: nothing in it is missed.
  await sbx.commands.run('mkdir -p /home/user/w/new/deep && echo y > /home/user/w/new/deep/y.txt && echo z > /home/user/w/old/z.txt')
  await until('events below new folders', () => seen('create', 'new/deep/y.txt') && seen('create', 'old/z.txt'))
  await sbx.commands.run('mv /home/user/w/watched.txt /home/user/w/moved.txt && chmod 600 /home/user/w/moved.txt && rm /home/user/w/moved.txt')
  await until('rename, chmod, remove', () => seen('rename', 'watched.txt') && seen('create', 'moved.txt') &&
    seen('chmod', 'moved.txt') && seen('remove', 'moved.txt'))
  await w.stop()
  await assert.rejects(sbx.files.watchDir('/home/user/no-such-dir', () => {}), (e) => e.name === 'NotFoundError' || /not.?found|no such/i.test(e.message))
  await assert.rejects(sbx.files.watchDir('/home/user/w/old/z.txt', () => {}), /not a directory/)
})

test('pty: create, input, resize, each line judged', async () => {
  let data = ''
  const h = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { data += new TextDecoder().decode(d) } })
  await sbx.pty.sendInput(h.pid, new TextEncoder().encode('stty size; echo pty-$((40+2))\n'))
  await until('pty output', () => data.includes('pty-42') && data.includes('24 80'))
  await sbx.pty.resize(h.pid, { cols: 100, rows: 30 })
  await sbx.pty.sendInput(h.pid, new TextEncoder().encode('stty size\n'))
  await until('resized', () => data.includes('30 100'))
  // A judged terminal: the shell asks the command policy about each line before it runs it.
  await sbx.pty.sendInput(h.pid, new TextEncoder().encode('rm -rf / ; echo after-$((2+2))\n'))
  await until('the denied line refused', () => data.includes('airlock: not run: denied by the command policy'))
  await sbx.pty.sendInput(h.pid, new TextEncoder().encode('echo next-$((3*3))\n'))
  await until('the next line runs', () => data.includes('next-9'))
  assert.ok(!data.includes('after-4'), 'no part of the denied line ran')
  await h.kill()
})

test('policy: a gated command names its approval, a denied one the policy', async () => {
  await assert.rejects(sbx.commands.run('npm install left-pad'), (e) => /apr-[a-z0-9]+/.test(e.message))
  const approvals = await (await fetch(process.env.AIRLOCK_URL + '/v1/approvals', {
    headers: { Authorization: 'Bearer ' + process.env.AIRLOCK_ADMIN_KEY } })).json()
  assert.ok(JSON.stringify(approvals).includes('npm install left-pad'))
  await assert.rejects(sbx.commands.run('rm -rf /'), (e) => /denied|polic/i.test(e.message))
})

test('updateNetwork replaces the egress allowlist; what Airlock cannot do is refused', async () => {
  const native = async () => (await (await fetch(`${process.env.AIRLOCK_URL}/v1/sandboxes/${sbx.sandboxId}`, {
    headers: { Authorization: 'Bearer ' + process.env.AIRLOCK_ADMIN_KEY } })).json()).network.allow
  await sbx.updateNetwork({ allowOut: ['updates.example.test'], denyOut: ['8.8.8.8'] })
  assert.deepEqual(await native(), ['updates.example.test'])
  await sbx.updateNetwork({})
  assert.deepEqual(await native(), [], 'omitted fields clear it: nothing is reachable')
  if (newest) // egressProxy came after the older SDK
    await assert.rejects(sbx.updateNetwork({ egressProxy: { address: 'proxy.example.test:1080' } }), /not supported/)
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

test('pause, then connect resumes it with its files and its running processes', async () => {
  await sbx.files.write('/home/user/keep.txt', 'kept')
  const ticker = await sbx.commands.run('for i in $(seq 10000); do echo tick-$i; sleep 0.2; done',
    { background: true, timeoutMs: 0 })
  await until('the ticker ticks', () => ticker.stdout.includes('tick-2'))
  await sbx.pause()
  assert.equal(await sbx.isRunning(), false)
  const again = await Sandbox.connect(sbx.sandboxId)
  assert.equal(await again.isRunning(), true)
  assert.equal(await again.files.read('/home/user/keep.txt'), 'kept')
  // As E2B keeps them: the process lives on, is listed and can be connected to.
  assert.ok((await again.commands.list()).some((p) => p.pid === ticker.pid))
  let seen = ''
  const back = await again.commands.connect(ticker.pid, { onStdout: (d) => { seen += d } })
  await until('ticks after the resume', () => /tick-\d+/.test(seen))
  await back.kill()
})

test('pause without memory: files kept, the guest booted again, its processes gone', { skip: !newest && 'the same request in every SDK version' }, async () => {
  const other = await Sandbox.create('base', { timeoutMs: 180_000 })
  try {
    await other.files.write('/home/user/kept.txt', 'on disk')
    const bootId = async (s) => (await s.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout.trim()
    const before = await bootId(other)
    const sleeper = await other.commands.run('sleep 600', { background: true, timeoutMs: 0 })
    await other.pause({ keepMemory: false })
    assert.equal(await other.isRunning(), false)
    const again = await Sandbox.connect(other.sandboxId)
    assert.equal(await again.isRunning(), true)
    assert.equal(await again.files.read('/home/user/kept.txt'), 'on disk')
    assert.notEqual(await bootId(again), before, 'a fresh boot')
    assert.ok(!(await again.commands.list()).some((p) => p.pid === sleeper.pid))
  } finally { await other.kill() }
})

test('lifecycle: the timeout pauses, and traffic wakes it again with autoResume', { skip: !newest && 'the same request in every SDK version' }, async () => {
  const waking = await Sandbox.create('base', { timeoutMs: 4_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
  const sleeping = await Sandbox.create('base', { timeoutMs: 4_000, lifecycle: { onTimeout: 'pause', autoResume: false } })
  try {
    assert.equal((await waking.getInfo()).lifecycle?.autoResume, true)
    await waking.files.write('/home/user/awake.txt', 'still here')
    for (const s of [waking, sleeping])
      await until('the timeout pauses ' + s.sandboxId, async () => (await s.getInfo()).state === 'paused', 30_000)
    assert.equal(await sleeping.isRunning(), false, 'no autoResume: it waits for connect')
    assert.equal((await sleeping.getInfo()).state, 'paused')
    // Any traffic (here the SDK's health probe, then a read) wakes it.
    assert.equal(await waking.isRunning(), true)
    assert.equal(await waking.files.read('/home/user/awake.txt'), 'still here')
    assert.equal((await waking.getInfo()).state, 'running')
  } finally { await waking.kill(); await sleeping.kill() }
})

test('sleep when idle: a hibernated sandbox (native idle rule) wakes on an SDK call', { skip: !newest && 'the same request in every SDK version' }, async () => {
  const admin = { Authorization: 'Bearer ' + process.env.AIRLOCK_ADMIN_KEY, 'Content-Type': 'application/json' }
  const made = await (await fetch(process.env.AIRLOCK_URL + '/v1/sandboxes', { method: 'POST', headers: admin,
    body: JSON.stringify({ template: 'debian', idle: { after_s: 3, action: 'hibernate' }, auto_resume: true }) })).json()
  const stateOf = async () => (await (await fetch(process.env.AIRLOCK_URL + '/v1/sandboxes/' + made.id, { headers: admin })).json()).state
  const s = await Sandbox.connect(made.id)
  try {
    await s.files.write('/home/user/slept.txt', 'kept across hibernation')
    await s.commands.run('echo $$ > /dev/shm/pid')
    await until('the idle rule hibernates ' + made.id, async () => (await stateOf()) === 'hibernated', 60_000)
    const r = await s.commands.run('cat /home/user/slept.txt; cat /dev/shm/pid > /dev/null && echo mem-ok')
    assert.equal(r.stdout, 'kept across hibernationmem-ok\n', 'the file (no newline), then its memory')
    assert.equal(await stateOf(), 'running')
  } finally { await s.kill() }
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

test('getMetrics: the guest\'s CPU, memory and disk, sampled from the first ask on', async () => {
  let metrics = []
  await until('a sample', async () => (metrics = await sbx.getMetrics()).length > 0, 30_000)
  const m = metrics[metrics.length - 1]
  assert.ok(m.timestamp instanceof Date && !isNaN(m.timestamp), 'a date')
  assert.ok(Math.abs(m.timestamp.getTime() - Date.now()) < 60_000)
  assert.ok(m.cpuCount >= 1)
  assert.ok(m.cpuUsedPct >= 0 && m.cpuUsedPct <= 100)
  assert.ok(m.memTotal > 100 * 2 ** 20 && m.memUsed > 0 && m.memUsed <= m.memTotal)
  assert.ok(m.diskTotal > 2 ** 30 && m.diskUsed > 0 && m.diskUsed <= m.diskTotal)
  // Memory the guest takes shows in the next sample.
  const h = await sbx.commands.run('python3 -c "b = bytearray(96 * 2**20); import time; time.sleep(60)"',
    { background: true, timeoutMs: 0 })
  await until('the memory in use grows', async () => {
    const now = await Sandbox.getMetrics(sbx.sandboxId, { start: new Date(Date.now() - 60_000) })
    return now.length > 0 && now[now.length - 1].memUsed > m.memUsed + 64 * 2 ** 20
  }, 30_000)
  await h.kill()
  assert.deepEqual(await Sandbox.getMetrics(sbx.sandboxId, { start: new Date(Date.now() - 3_600_000), end: new Date(Date.now() - 1_800_000) }), [])
})

test('snapshots: create, list, a sandbox from one, delete', async () => {
  const src = await Sandbox.create('base', { timeoutMs: 120_000 })
  try {
    await src.files.write('/home/user/snapped.txt', 'from the snapshot')
    const snap = await src.createSnapshot()
    assert.match(snap.snapshotId, /^snap-/)
    assert.equal(await src.isRunning(), true, 'the source goes on')
    const listed = await Sandbox.listSnapshots({ sandboxId: src.sandboxId }).nextItems()
    assert.deepEqual(listed.map((s) => s.snapshotId), [snap.snapshotId])
    const clone = await Sandbox.create(snap.snapshotId, { timeoutMs: 60_000 })
    assert.equal(await clone.files.read('/home/user/snapped.txt'), 'from the snapshot')
    await clone.kill()
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false)

    // A named one: the name (with its tag) is what a create takes.
    const name = `snap-sdk-${Date.now()}`  // as E2B's own tests name them
    await src.files.write('/home/user/snapped.txt', 'named')
    const named = await src.createSnapshot({ name })
    assert.match(named.snapshotId, new RegExp(`/${name}:default$`))
    assert.equal(named.names.length, 1)
    const byName = await Sandbox.listSnapshots({ name }).nextItems()
    assert.deepEqual(byName.map((s) => s.snapshotId), [named.snapshotId])
    const fromName = await Sandbox.create(named.snapshotId, { timeoutMs: 60_000 })
    assert.equal(await fromName.files.read('/home/user/snapped.txt'), 'named')
    await fromName.kill()
    assert.equal(await Sandbox.deleteSnapshot(named.snapshotId), true)
    assert.deepEqual(await Sandbox.listSnapshots({ name }).nextItems(), [])
  } finally { await src.kill() }
})

test('fork: clones of a running sandbox, each its own', { skip: typeof Sandbox.fork !== 'function' && 'no fork in this SDK version' }, async () => {
  const src = await Sandbox.create('base', { timeoutMs: 120_000 })
  try {
    await src.files.write('/home/user/parent.txt', 'parent')
    const forks = await Sandbox.fork(src.sandboxId, { count: 2, timeoutMs: 60_000 })
    assert.equal(forks.length, 2)
    for (const f of forks) {
      assert.equal(await f.files.read('/home/user/parent.txt'), 'parent')
      await f.files.write('/home/user/child.txt', f.sandboxId)
    }
    assert.equal(await src.files.exists('/home/user/child.txt'), false)
    for (const f of forks) await f.kill()
  } finally { await src.kill() }
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
