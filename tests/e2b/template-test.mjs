// The unmodified e2b SDK's Template builder through Airlock's E2B front door:
// Template.build(...) then Sandbox.create(name). Env as sdk-test.mjs.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

const { Template, Sandbox, waitForPort } = await import(process.env.E2B_SDK || 'e2b')
const name = 'sdk-tpl-' + process.pid
const sandboxes = []
after(async () => { for (const s of sandboxes) { try { await s.kill() } catch {} } })

test('Template.build: fromTemplate(base), runCmd, copy, setEnvs, setStartCmd with waitForPort; Sandbox.create(name) finds it serving', async () => {
  const ctx = fs.mkdtempSync(path.join(os.tmpdir(), 'e2b-tpl-'))
  fs.mkdirSync(path.join(ctx, 'site'))
  fs.writeFileSync(path.join(ctx, 'site', 'index.html'), 'built-by-the-sdk\n')
  const logs = []
  const t = Template({ fileContextPath: ctx }).fromTemplate('base')
    .runCmd('echo ran-at-build > /home/user/marker')
    .copy('site', '/home/user/site')
    .setEnvs({ TEMPLATE_GREETING: 'hi' })
    .setStartCmd('cd /home/user/site && python3 -m http.server 8002', waitForPort(8002))
  const info = await Template.build(t, name, { onBuildLogs: (e) => logs.push(String(e?.message ?? e)) })
  fs.rmSync(ctx, { recursive: true, force: true })
  assert.ok(info.buildId, 'a build id')
  assert.ok(logs.some((l) => l.includes('echo ran-at-build')), 'the server log reached onBuildLogs: ' + logs.join('\n'))

  const sbx = await Sandbox.create(name, { timeoutMs: 300_000 })
  sandboxes.push(sbx)
  const served = await sbx.commands.run('curl -s -m 10 localhost:8002/index.html')
  assert.equal(served.stdout, 'built-by-the-sdk\n', 'the start command serves at the first command')
  assert.equal((await sbx.commands.run('cat /home/user/marker')).stdout, 'ran-at-build\n')
  assert.equal((await sbx.commands.run('echo $TEMPLATE_GREETING')).stdout, 'hi\n')
  const owner = await sbx.commands.run('stat -c %U /home/user/site/index.html')
  assert.equal(owner.stdout, 'user\n', 'copies belong to the build user, as on E2B')
})

test('a failing step ends Template.build with a BuildError that says why', async () => {
  await assert.rejects(
    Template.build(Template().fromTemplate('base').runCmd('echo nope; exit 4'), name + '-fail'),
    (e) => /exited with 4/.test(e.message) && /exit 4/.test(e.message))
})

test('fromImage with a registry image: images cannot be pulled here, and the message names base', async () => {
  await assert.rejects(
    Template.build(Template().fromImage('python:3.12').runCmd('true'), name + '-image'),
    (e) => /image/i.test(e.message) && /registry|pull/i.test(e.message) && /\bbase\b/.test(e.message))
})
