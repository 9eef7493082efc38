import { readFileSync } from "node:fs"
const p = JSON.parse(readFileSync(process.argv[2], "utf8"))
const byId = new Map(p.nodes.map((n) => [n.id, n]))
const parent = new Map()
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
const stackOf = (id) => { const s = []; for (let x = id; x !== undefined; x = parent.get(x)) s.push(byId.get(x).callFrame); return s }
let t = p.startTime
let run = null
const runs = []
for (let i = 0; i < p.samples.length; i++) {
  t += p.timeDeltas[i]
  const n = byId.get(p.samples[i])
  const idle = n.callFrame.functionName === "(idle)"
  if (!idle) { if (run === null) run = { start: t, ids: [] }; run.ids.push([p.samples[i], p.timeDeltas[i + 1] ?? 0]); run.end = t }
  else if (run !== null) { runs.push(run); run = null }
}
runs.sort((a, b) => (b.end - b.start) - (a.end - a.start))
for (const r of runs.slice(0, Number(process.argv[3] ?? 4))) {
  console.log(`stretch ${((r.end - r.start) / 1000).toFixed(1)} ms`)
  const self = new Map(), incl = new Map()
  for (const [id, dt] of r.ids) {
    const st = stackOf(id)
    const f = st[0]; const k = `${f.functionName || "(anon)"} ${f.url.split("/").slice(-2).join("/")}:${f.lineNumber}`
    self.set(k, (self.get(k) ?? 0) + dt)
    const seen = new Set()
    for (const g of st) { const kk = `${g.functionName || "(anon)"} ${g.url.split("/").slice(-2).join("/")}:${g.lineNumber}`; if (!seen.has(kk)) { seen.add(kk); incl.set(kk, (incl.get(kk) ?? 0) + dt) } }
  }
  console.log("  self:", [...self].sort((a, b) => b[1] - a[1]).slice(0, 8).map(([k, v]) => `${(v / 1000).toFixed(1)} ${k}`).join("\n        "))
  console.log("  incl:", [...incl].sort((a, b) => b[1] - a[1]).slice(0, 14).map(([k, v]) => `${(v / 1000).toFixed(1)} ${k}`).join("\n        "))
}
