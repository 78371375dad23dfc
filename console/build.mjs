// Builds the console into $CONSOLE_OUT (default ../build/console): index.html, app.js (the minified ES
// module the page loads), chunk-*.js (what app.js imports when needed: the terminal, xterm.js), app.css
// (the console's styles and xterm's). airlockd serves the directory at /console/ and replaces
// __CSP_NONCE__ in index.html per response. Nothing here reaches the network.
import * as esbuild from 'esbuild'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import zlib from 'node:zlib'

const here = path.dirname(fileURLToPath(import.meta.url))
const out = path.resolve(here, process.env.CONSOLE_OUT || '../build/console')
fs.mkdirSync(out, { recursive: true })
// what an older build left behind (old chunks, source maps) is not served
for (const f of fs.readdirSync(out)) if (/^(index\.html|app\.(js|css)|chunk-[\w-]+\.js)(\.map)?$/.test(f)) fs.rmSync(path.join(out, f))

const js = await esbuild.build({
  entryPoints: [path.join(here, 'src/main.js')],
  bundle: true,
  minify: true,
  format: 'esm',
  splitting: true,
  outdir: out,
  entryNames: 'app',
  chunkNames: 'chunk-[hash]',
  target: ['chrome110', 'firefox115', 'safari16'],
  legalComments: 'none',
  charset: 'utf8',
  write: false,
  logLevel: 'warning',
})
for (const f of js.outputFiles) fs.writeFileSync(f.path, f.contents)
const scripts = js.outputFiles.map((f) => [path.basename(f.path), f.contents])

const xtermCss = fs.readFileSync(path.join(here, 'node_modules/@xterm/xterm/css/xterm.css'), 'utf8')
const ownCss = fs.readFileSync(path.join(here, 'src/styles.css'), 'utf8')
const css = await esbuild.transform(`${xtermCss}\n${ownCss}`, { loader: 'css', minify: true, legalComments: 'none' })
fs.writeFileSync(path.join(out, 'app.css'), css.code)

fs.copyFileSync(path.join(here, 'src/index.html'), path.join(out, 'index.html'))

const gz = (b) => zlib.gzipSync(b, { level: 9 }).length
const kb = (n) => (n / 1024).toFixed(1) + ' KB'
const all = Buffer.concat(scripts.map(([, b]) => b))
console.log(`console -> ${out}: ${scripts.map(([n, b]) => `${n} ${kb(b.length)} (gzip ${kb(gz(b))})`).join(', ')}; all JavaScript ${kb(all.length)} (gzip ${kb(scripts.reduce((a, [, b]) => a + gz(b), 0))}); app.css ${kb(css.code.length)} (gzip ${kb(gz(Buffer.from(css.code)))})`)
