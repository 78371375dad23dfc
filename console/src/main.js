// The console: session (sign-in, sign-out), the header, and the hash router. nonce.js must stay the first
// import: it prepares <style> elements for the CSP before xterm (imported by a page) can make one.
import './nonce.js'
import { h, clear, replace } from './dom.js'
import { api, request, setCsrf, setUnauthorizedHandler, errText } from './api.js'
import { events } from './events.js'
import { session, can, approvals, startLive, stopLive } from './store.js'
import { signInPage } from './pages/signin.js'
import { sandboxesPage } from './pages/sandboxes.js'
import { sandboxPage } from './pages/sandbox.js'
import { approvalsPage, clearHistory } from './pages/approvals.js'
import { evidencePage } from './pages/evidence.js'
import { adminPage } from './pages/admin.js'

const app = document.getElementById('app')
let cleanup = null
let pageTitle = 'Airlock'
let shell = null

function setTitle(t) {
  pageTitle = t
  updateTitle()
}
function updateTitle() {
  const n = can.decide() ? approvals.list.length : 0
  document.title = (n ? `(${n}) ` : '') + pageTitle + ' · Airlock'
}

const ROUTES = [
  [/^#\/sandboxes\/?$/, 'sandboxes', sandboxesPage],
  [/^#\/sandboxes\/([^/]+)\/?$/, 'sandboxes', sandboxPage],
  [/^#\/approvals\/?$/, 'approvals', approvalsPage],
  [/^#\/evidence\/([^/]+)\/?$/, 'sandboxes', evidencePage],
  [/^#\/admin\/?$/, 'admin', adminPage],
]

function unmount() {
  if (cleanup) { try { cleanup() } catch (e) { console.error(e) } }
  cleanup = null
}

function render() {
  if (!session.current) return
  const hash = location.hash || ''
  const match = ROUTES.map(([re, nav, page]) => [re.exec(hash), nav, page]).find(([m]) => m)
  if (!match) { location.replace('#/sandboxes'); return }
  const [m, nav, page] = match
  if (!shell) buildShell()
  for (const a of shell.nav.querySelectorAll('a[data-nav]')) {
    if (a.dataset.nav === nav) a.setAttribute('aria-current', 'page')
    else a.removeAttribute('aria-current')
  }
  unmount()
  clear(shell.main)
  const params = m.slice(1).map((x) => { try { return decodeURIComponent(x) } catch { return x } })
  try {
    cleanup = page({ main: shell.main, params, setTitle, navigate: (hsh) => { location.hash = hsh } }) || null
  } catch (e) {
    console.error(e)
    shell.main.append(h('p.error', { role: 'alert' }, 'This page failed: ' + errText(e)))
  }
  window.scrollTo(0, 0)
  // a new page: the keyboard and screen readers start at its content (not on the first page after sign-in)
  if (shell.rendered) shell.main.focus({ preventScroll: true })
  shell.rendered = true
}

function buildShell() {
  const s = session.current
  const badge = h('span.count', { hidden: true })
  const links = [h('a', { href: '#/sandboxes', 'data-nav': 'sandboxes' }, 'Sandboxes')]
  if (can.decide()) links.push(h('a', { href: '#/approvals', 'data-nav': 'approvals' }, 'Approvals', badge))
  if (can.admin()) links.push(h('a', { href: '#/admin', 'data-nav': 'admin' }, 'Admin'))
  const live = h('span.live', { title: 'Live updates' }, 'connecting')
  const signOut = h('button.btn.btn-small', { type: 'button', 'data-testid': 'sign-out' }, 'Sign out')
  signOut.addEventListener('click', doSignOut)
  const nav = h('nav.nav', { 'aria-label': 'Main' }, links)
  const main = h('main.main', { id: 'main', tabindex: '-1' })
  const skip = h('a.skip-link', { href: '#main' }, 'Skip to content')
  skip.addEventListener('click', (e) => { e.preventDefault(); main.focus() })
  const who = h('div.who',
    h('span.who-name', s.key_name || s.key_id || 'signed in'),
    h('span.badge.badge-role', s.role || '?'),
    h('span.who-tenant', 'tenant ', h('strong', s.tenant === '*' ? 'all' : s.tenant || '—')))
  const header = h('header.topbar',
    h('a.brand', { href: '#/sandboxes' }, h('span.brand-mark', { 'aria-hidden': 'true' }, '◆'), 'Airlock'),
    nav, h('div.spacer'), live, who, signOut)
  replace(app, skip, header, main)
  const offStatus = events.onStatus((st) => {
    live.textContent = st === 'live' ? 'live' : st === 'off' ? 'offline' : st
    live.className = 'live live-' + st
  })
  const offApprovals = approvals.on(() => {
    const n = approvals.list.length
    badge.hidden = !n
    badge.textContent = String(n)
    badge.setAttribute('aria-label', `${n} pending`)
    updateTitle()
  })
  shell = { main, nav, off: () => { offStatus(); offApprovals() } }
}

function showSignIn(message) {
  unmount()
  if (shell) { shell.off(); shell = null }
  stopLive()
  session.current = null
  setCsrf('')
  document.title = 'Sign in · Airlock'
  cleanup = signInPage(app, { message, onSignedIn })
}

function onSignedIn(s) {
  unmount()
  session.current = s
  setCsrf(s.csrf_token)
  startLive()
  // warm the terminal's chunk (xterm.js) so the first sandbox page opens at once
  setTimeout(() => import('./terminal.js').catch(() => {}), 1500)
  if (!location.hash || location.hash === '#' || location.hash === '#/') location.replace('#/sandboxes') // hashchange renders
  else render()
}

async function doSignOut() {
  try { await request('DELETE', '/v1/sessions/current', { quiet401: true }) } catch {}
  clearHistory()
  showSignIn('Signed out.')
}

setUnauthorizedHandler(() => { if (session.current) showSignIn('Your session ended: sign in again.') })
window.addEventListener('hashchange', () => { if (session.current) render() })

async function boot() {
  try {
    const s = await api.get('/v1/sessions/current', { quiet401: true })
    if (s && s.role) return onSignedIn(s)
    showSignIn()
  } catch (e) {
    showSignIn(e.status === 401 ? '' : errText(e))
  }
}
boot()
