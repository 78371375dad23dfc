// Sign in: an API key is exchanged for a session (POST /v1/sessions); the key itself is not kept.
import { h, replace } from '../dom.js'
import { api, errText } from '../api.js'

export function signInPage(root, { message, onSignedIn }) {
  const input = h('input', { type: 'password', id: 'api-key', name: 'key', 'data-testid': 'key-input', autocomplete: 'off', spellcheck: 'false', required: true, 'aria-describedby': 'api-key-hint' })
  const button = h('button.btn.btn-primary.btn-block', { type: 'submit', 'data-testid': 'sign-in' }, 'Sign in')
  const status = h('p.signin-status', { role: 'alert' }, message || '')
  if (message && !/signed out/i.test(message)) status.classList.add('error')
  const form = h('form.signin-form', { novalidate: true },
    h('label', { for: 'api-key' }, 'API key'),
    input,
    h('p.hint', { id: 'api-key-hint' }, 'An agent, approver or admin key (ak_…). It is exchanged for a browser session and not stored.'),
    button, status)
  form.addEventListener('submit', async (e) => {
    e.preventDefault()
    const key = input.value.trim()
    if (!key) { status.textContent = 'Enter an API key.'; status.className = 'signin-status error'; input.focus(); return }
    button.disabled = true
    status.className = 'signin-status'
    status.textContent = 'Signing in…'
    try {
      const s = await api.post('/v1/sessions', { key }, { quiet401: true })
      input.value = ''
      onSignedIn(s)
    } catch (err) {
      status.className = 'signin-status error'
      status.textContent = err.status === 401 ? 'That key was not accepted: it is unknown, revoked or expired.' : 'Sign-in failed: ' + errText(err)
      button.disabled = false
      input.focus()
      input.select()
    }
  })
  replace(root,
    h('main.signin', { id: 'main' },
      h('div.signin-card',
        h('div.signin-brand', h('span.brand-mark', { 'aria-hidden': 'true' }, '◆'), ' Airlock'),
        h('h1', 'Sign in to the console'),
        form)))
  input.focus()
  return null
}
