// A terminal in the sandbox: xterm.js over the PTY WebSocket GET /v1/sandboxes/{id}/exec/ws
// (api/websocket.md). First text message: the exec request with tty, rows and cols; then keystrokes go as
// binary frames and size changes as {"type":"resize","rows","cols"}. The server sends binary frames
// (first byte the channel, then output) and text {"type":"started"|"exit"|"error"|"pending_approval"|"approved"}.
import { Terminal } from '@xterm/xterm'
import { FitAddon } from '@xterm/addon-fit'

const THEME = {
  // GitHub's dark palette: every colour has at least 4.5:1 contrast on the background
  background: '#0d1117', foreground: '#e6edf3', cursor: '#e6edf3', cursorAccent: '#0d1117',
  selectionBackground: '#264f78', selectionForeground: '#ffffff',
  black: '#8b949e', red: '#ff7b72', green: '#3fb950', yellow: '#d29922', blue: '#58a6ff', magenta: '#bc8cff', cyan: '#39c5cf', white: '#b1bac4',
  brightBlack: '#8b949e', brightRed: '#ffa198', brightGreen: '#56d364', brightYellow: '#e3b341', brightBlue: '#79c0ff', brightMagenta: '#d2a8ff', brightCyan: '#56d4dd', brightWhite: '#f0f6fc',
}
const SHELLS = [['/bin/bash', '-l'], ['/bin/sh', '-l']]
const enc = new TextEncoder()

export function createTerminal(container, sandboxId, { onStatus = () => {} } = {}) {
  const term = new Terminal({
    cursorBlink: true,
    fontFamily: 'ui-monospace, SFMono-Regular, "DejaVu Sans Mono", Menlo, Consolas, "Liberation Mono", monospace',
    fontSize: 13,
    lineHeight: 1.15,
    scrollback: 5000,
    theme: THEME,
    minimumContrastRatio: 4.5,
    allowProposedApi: false,
  })
  const fit = new FitAddon()
  term.loadAddon(fit)
  term.open(container)
  const safeFit = () => { try { if (container.offsetParent !== null) fit.fit() } catch {} }
  safeFit()

  let ws = null
  let shellIndex = 0
  let started = false
  let openedAt = 0
  let disposed = false
  let exitSeen = false
  let attempt = 0
  let runningText = ''

  const say = (text, colour = '90') => term.write(`\r\n\x1b[${colour}m${text}\x1b[0m\r\n`)
  const send = (data) => { if (ws && ws.readyState === WebSocket.OPEN) ws.send(data) }

  function connect(reset = true) {
    if (disposed) return
    if (ws) { try { ws.close() } catch {} }
    if (reset) shellIndex = 0
    started = false
    exitSeen = false
    const my = ++attempt
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:'
    const sock = new WebSocket(`${proto}//${location.host}/v1/sandboxes/${encodeURIComponent(sandboxId)}/exec/ws`)
    sock.binaryType = 'arraybuffer'
    ws = sock
    onStatus('connecting', 'Connecting…')
    sock.onopen = () => {
      if (my !== attempt) return
      openedAt = Date.now()
      safeFit()
      sock.send(JSON.stringify({ cmd: SHELLS[shellIndex], tty: true, rows: term.rows, cols: term.cols }))
      onStatus('opening', 'Starting ' + SHELLS[shellIndex][0] + '…')
    }
    sock.onmessage = (e) => {
      if (my !== attempt) return
      if (typeof e.data !== 'string') {
        const b = new Uint8Array(e.data)
        if (b.length > 1) term.write(b.subarray(1))
        return
      }
      let m = {}
      try { m = JSON.parse(e.data) } catch { return }
      if (m.type === 'started') {
        started = true
        runningText = `Running ${SHELLS[shellIndex][0]} (pid ${m.pid})${m.lines_judged ? ', each line judged by the policy' : ''}`
        onStatus('running', runningText)
      } else if (m.type === 'line_pending_approval') {
        // the shell prints it too; the status says it until it is decided
        onStatus('pending', `A line waits for approval ${m.approval_id || ''}`, m)
      } else if (m.type === 'line_decided') {
        onStatus('running', runningText)
      } else if (m.type === 'pending_approval') {
        onStatus('pending', `Waiting for approval ${m.approval_id || ''}`, m)
        say(`The shell is held for approval ${m.approval_id || ''} (${m.class || ''}: ${m.reason || ''}). Typing is kept until it is decided.`, '33')
      } else if (m.type === 'approved') {
        say(`Approved${m.by ? ' by ' + m.by : ''}.`, '32')
      } else if (m.type === 'exit') {
        exitSeen = true
        // a shell missing from the template: fall back to the next one once
        const quick = Date.now() - openedAt < 3000
        if (shellIndex + 1 < SHELLS.length && (!started || (quick && m.exit_code === 127))) {
          shellIndex++
          connect(false)
          return
        }
        const why = m.error ? ': ' + m.error : m.signal ? ` (signal ${m.signal})` : ''
        say(`[the shell exited with code ${m.exit_code}${m.timed_out ? ', timed out' : ''}${why}]`)
        onStatus('exited', `Exited with code ${m.exit_code}`)
      } else if (m.type === 'error') {
        exitSeen = true
        if (!started && shellIndex + 1 < SHELLS.length && /not found|no such file|ENOENT|exec/i.test(m.message || '') && m.code !== 'policy_denied' && m.code !== 'forbidden') {
          shellIndex++
          connect(false)
          return
        }
        say(`[${m.code || 'error'}] ${m.message || ''}`, '31')
        onStatus('error', m.message || m.code || 'error')
      }
    }
    sock.onclose = (e) => {
      if (my !== attempt || disposed) return
      if (!exitSeen) {
        const hint = openedAt ? '' : ' (refused before it opened: is the sandbox running and may your role use it?)'
        say(`[connection closed${e.code && e.code !== 1000 && e.code !== 1005 ? ' (' + e.code + ')' : ''}${hint}]`)
        onStatus('closed', 'Disconnected')
      }
    }
    sock.onerror = () => {}
  }

  term.onData((d) => send(enc.encode(d)))
  term.onBinary((d) => send(Uint8Array.from(d, (c) => c.charCodeAt(0) & 255)))
  term.onResize(({ cols, rows }) => send(JSON.stringify({ type: 'resize', rows, cols })))

  let t = null
  const onWindowResize = () => { clearTimeout(t); t = setTimeout(safeFit, 80) }
  window.addEventListener('resize', onWindowResize)
  const ro = typeof ResizeObserver !== 'undefined' ? new ResizeObserver(onWindowResize) : null
  if (ro) ro.observe(container)
  const focus = () => term.focus()
  container.addEventListener('click', focus)

  connect()
  return {
    term,
    reconnect: () => { term.reset(); connect(true) },
    interrupt: () => { send(JSON.stringify({ type: 'signal', signal: 'INT' })); term.focus() },
    focus,
    fit: safeFit,
    dispose() {
      disposed = true
      window.removeEventListener('resize', onWindowResize)
      if (ro) ro.disconnect()
      container.removeEventListener('click', focus)
      if (ws) { try { ws.close() } catch {} }
      term.dispose()
    },
  }
}
