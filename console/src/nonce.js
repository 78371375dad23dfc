// Runs first (main.js imports it before anything else). The console's CSP allows styles from 'self' and
// from <style> elements carrying the per-response nonce; it allows no inline style attribute.
// - xterm's DOM renderer makes <style> elements: each one made here gets the nonce at creation.
// - xterm sets some cell colours with setAttribute('style', ...): that goes through the CSSOM instead
//   (element.style.cssText), which CSP does not govern, so the same colours apply without a violation.
const meta = document.querySelector('meta[name="csp-nonce"]')
export const nonce = meta && meta.content && meta.content !== '__CSP_NONCE__' ? meta.content : ''

const createElement = Document.prototype.createElement
Document.prototype.createElement = function (tag, options) {
  const el = createElement.call(this, tag, options)
  if (nonce && typeof tag === 'string' && tag.toLowerCase() === 'style') el.setAttribute('nonce', nonce)
  return el
}

const setAttribute = Element.prototype.setAttribute
Element.prototype.setAttribute = function (name, value) {
  if (typeof name === 'string' && name.toLowerCase() === 'style' && this.style) {
    this.style.cssText = String(value)
    return
  }
  return setAttribute.call(this, name, value)
}
