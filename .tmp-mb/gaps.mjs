import { readFileSync } from "node:fs"
const p = JSON.parse(readFileSync(process.argv[2], "utf8"))
const byId = new Map(p.nodes.map((n) => [n.id, n]))
const parent = new Map()
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
const stackOf = (id) => { const s = []; for (let x = id; x !== undefined; x = parent.get(x)) s.push(byId.get(x).callFrame); return s }
const name = (g) => `${g.functionName || "(anon)"} ${g.url.split("/").slice(-2).join("/")}:${g.lineNumber}`
// A "turn boundary": an idle sample, or a sample in a timers/immediate dispatcher's own frame (a new macrotask).
let t = p.startTime
const samples = []
for (let i = 0; i < p.samples.length; i++) { t += p.timeDeltas[i]; samples.push([t, p.samples[i]]) }
const boundary = (id) => { const st = stackOf(id); const top = st[0].functionName; return top === "(idle)" || top === "(program)" || st.length <= 2 }
let last = samples[0][0], cur = []
const gaps = []
for (const [ts, id] of samples) {
  if (boundary(id)) { if (cur.length) gaps.push({ ms: (ts - last) / 1000, cur }); cur = []; last = ts } else cur.push(id)
}
gaps.sort((a, b) => b.ms - a.ms)
for (const g of gaps.slice(0, Number(process.argv[3] ?? 5))) {
  const incl = new Map()
  for (const id of g.cur) { const seen = new Set(); for (const f of stackOf(id)) { const k = name(f); if (!seen.has(k)) { seen.add(k); incl.set(k, (incl.get(k) ?? 0) + 1) } } }
  console.log(`gap ${g.ms.toFixed(1)} ms, ${g.cur.length} samples:`, [...incl].sort((a, b) => b[1] - a[1]).filter(([k]) => !/(root)|runLoop|evaluate|makeExit|makePrimitiveProto|afterScheduled|runTasks|processImmediate|runInAsyncScope|effect.js:753/.test(k)).slice(0, 12).map(([k, v]) => `${v} ${k}`).join(" | "))
}
