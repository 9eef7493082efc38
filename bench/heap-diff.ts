/**
 * What a set of open requests holds, by owner: two heap snapshots of one process (e.g. the pair
 * `bench/stream-memory.ts --snapshot=DIR` writes, before and with the streams open), the objects
 * new in the second (snapshot ids are stable within a process), and the second snapshot's
 * dominator tree. Each new object is charged to its nearest dominator, so a fiber whose stack
 * holds a request's closures shows as one owner with its retained size — where a count of objects
 * by constructor shows only many small closures. Sizes are per unit (`--per`, e.g. the number of
 * open streams).
 *
 *   node bench/heap-diff.ts BEFORE.heapsnapshot AFTER.heapsnapshot [--per 500] [--top 30]
 *        [--tree LABEL [--depth 6] [--min-bytes 100] [--samples N]]
 *
 * Without `--tree`: the new objects that no other new object dominates (the roots of what the
 * requests hold), grouped by label, by retained bytes per unit. With `--tree LABEL` (a label from
 * that list, e.g. `object:FiberImpl` or `Ctx{scope}`): one sample's dominator subtree, with the
 * edge names that lead to each child. Labels: `object:<constructor>`, `Object{first props}` for
 * plain objects, `Ctx{first variables}` for closure contexts, `closure name@line:column`.
 * Needs memory: run with `--max-old-space-size=8000` for snapshots of ~60 MB.
 */
import { readFileSync } from "node:fs"
import { parseArgs } from "node:util"

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    per: { type: "string", default: "1" },
    top: { type: "string", default: "30" },
    tree: { type: "string" },
    depth: { type: "string", default: "6" },
    "min-bytes": { type: "string", default: "100" },
    samples: { type: "string", default: "1" }
  }
})
const [beforePath, afterPath] = positionals
if (beforePath === undefined || afterPath === undefined) throw new Error("usage: heap-diff.ts BEFORE AFTER [--per N] [--tree LABEL]")
const per = Number(values.per)

interface Snapshot {
  readonly snapshot: { readonly meta: { node_fields: Array<string>; node_types: [Array<string>]; edge_fields: Array<string>; edge_types: [Array<string>] } }
  readonly nodes: Array<number>
  readonly edges: Array<number>
  readonly strings: Array<string>
  readonly locations: Array<number>
}

const read = (path: string) => JSON.parse(readFileSync(path, "utf8")) as Snapshot

const idsOf = (s: Snapshot) => {
  const fields = s.snapshot.meta.node_fields
  const width = fields.length
  const at = fields.indexOf("id")
  const ids = new Set<number>()
  for (let i = 0; i < s.nodes.length; i += width) ids.add(s.nodes[i + at]!)
  return ids
}

const before = idsOf(read(beforePath))
const s = read(afterPath)
const meta = s.snapshot.meta
const N = meta.node_fields.length
const E = meta.edge_fields.length
const [iType, iName, iSize, iEdges, iId] = ["type", "name", "self_size", "edge_count", "id"].map((f) => meta.node_fields.indexOf(f)) as [number, number, number, number, number]
const [eType, eName, eTo] = ["type", "name_or_index", "to_node"].map((f) => meta.edge_fields.indexOf(f)) as [number, number, number]
const nodeTypes = meta.node_types[0]
const edgeTypes = meta.edge_types[0]
const weak = edgeTypes.indexOf("weak")
const { nodes, edges, strings } = s
const count = nodes.length / N

/** First edge (in edge units) of each node. */
const firstEdge = new Int32Array(count + 1)
for (let n = 0, e = 0; n < count; n++) {
  firstEdge[n] = e
  e += nodes[n * N + iEdges]!
}
firstEdge[count] = edges.length / E
const target = (k: number) => edges[k * E + eTo]! / N
const isWeak = (k: number) => edges[k * E + eType] === weak
const edgeName = (k: number) => {
  const type = edgeTypes[edges[k * E + eType]!]!
  return type === "element" || type === "hidden" ? `[${edges[k * E + eName]}]` : strings[edges[k * E + eName]!]!
}

// Depth-first postorder from the synthetic root (node 0), strong edges only.
const order = new Int32Array(count).fill(-1)
const post: Array<number> = []
const stackNode = [0]
const stackEdge = [firstEdge[0]!]
order[0] = -2
while (stackNode.length > 0) {
  const n = stackNode[stackNode.length - 1]!
  let k = stackEdge[stackEdge.length - 1]!
  let descended = false
  while (k < firstEdge[n + 1]!) {
    const t = target(k)
    const skip = isWeak(k) || order[t] !== -1
    k++
    if (skip) continue
    order[t] = -2
    stackEdge[stackEdge.length - 1] = k
    stackNode.push(t)
    stackEdge.push(firstEdge[t]!)
    descended = true
    break
  }
  if (!descended) {
    stackNode.pop()
    stackEdge.pop()
    order[n] = post.length
    post.push(n)
  }
}

// Predecessors of reachable nodes, then immediate dominators (Cooper, Harvey and Kennedy's iteration).
const predStart = new Int32Array(count + 1)
for (let n = 0; n < count; n++) {
  if (order[n]! < 0) continue
  for (let k = firstEdge[n]!; k < firstEdge[n + 1]!; k++) if (!isWeak(k)) predStart[target(k) + 1]!++
}
for (let i = 0; i < count; i++) predStart[i + 1]! += predStart[i]!
const preds = new Int32Array(predStart[count]!)
const filled = predStart.slice()
for (let n = 0; n < count; n++) {
  if (order[n]! < 0) continue
  for (let k = firstEdge[n]!; k < firstEdge[n + 1]!; k++) if (!isWeak(k)) preds[filled[target(k)]!++] = n
}
const idom = new Int32Array(count).fill(-1)
idom[0] = 0
const intersect = (a: number, b: number) => {
  while (a !== b) {
    while (order[a]! < order[b]!) a = idom[a]!
    while (order[b]! < order[a]!) b = idom[b]!
  }
  return a
}
for (let changed = true; changed;) {
  changed = false
  for (let i = post.length - 1; i >= 0; i--) {
    const n = post[i]!
    if (n === 0) continue
    let dominator = -1
    for (let p = predStart[n]!; p < predStart[n + 1]!; p++) {
      const q = preds[p]!
      if (idom[q] !== -1) dominator = dominator === -1 ? q : intersect(q, dominator)
    }
    if (dominator !== idom[n]) {
      idom[n] = dominator
      changed = true
    }
  }
}

const retained = new Float64Array(count)
for (const n of post) retained[n]! += nodes[n * N + iSize]!
for (const n of post) if (n !== 0 && idom[n]! >= 0) retained[idom[n]!]! += retained[n]!

const isNew = (n: number) => !before.has(nodes[n * N + iId]!)
const locations = new Map<number, string>()
for (let i = 0; i < s.locations.length; i += 4) locations.set(s.locations[i]! / N, `${s.locations[i + 2]! + 1}:${s.locations[i + 3]}`)
const label = (n: number) => {
  const type = nodeTypes[nodes[n * N + iType]!]!
  const name = strings[nodes[n * N + iName]!]!
  if (type === "closure") return `closure ${name}@${locations.get(n) ?? "?"}`
  if (type.includes("string")) return "string"
  if (type === "object" && (name === "Object" || name === "system / Context")) {
    const names: Array<string> = []
    for (let k = firstEdge[n]!; k < firstEdge[n + 1]! && names.length < 5; k++) {
      const edgeType = edgeTypes[edges[k * E + eType]!]
      if (edgeType === "property" || edgeType === "context") names.push(edgeName(k))
    }
    return `${name === "Object" ? "Object" : "Ctx"}{${names.join(",")}}`
  }
  return `${type}:${name.slice(0, 50)}`
}
const perUnit = (bytes: number) => (bytes / per).toFixed(0).padStart(7)

if (values.tree === undefined) {
  let newBytes = 0
  const groups = new Map<string, { count: number; bytes: number }>()
  for (const n of post) {
    if (!isNew(n)) continue
    newBytes += nodes[n * N + iSize]!
    // Code compiled between the snapshots (and what it holds) is the JIT's, not any request's.
    if (isNew(idom[n]!) || nodeTypes[nodes[n * N + iType]!] === "code") continue
    const key = label(n)
    const group = groups.get(key) ?? { count: 0, bytes: 0 }
    group.count++
    group.bytes += retained[n]!
    groups.set(key, group)
  }
  console.log(`new objects: ${(newBytes / per).toFixed(0)} bytes per unit; the roots of what they hold, by retained bytes per unit:`)
  for (const [key, group] of [...groups].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, Number(values.top))) {
    console.log(`${perUnit(group.bytes)} ${(group.count / per).toFixed(2).padStart(7)}  ${key}`)
  }
} else {
  const children = new Map<number, Array<number>>()
  for (const n of post) {
    if (n === 0 || idom[n]! < 0) continue
    const list = children.get(idom[n]!) ?? []
    list.push(n)
    children.set(idom[n]!, list)
  }
  const samples = post.filter((n) => isNew(n) && !isNew(idom[n]!) && label(n) === values.tree)
  if (samples.length === 0) throw new Error(`no new root labelled ${values.tree}`)
  const edgeTo = (from: number, to: number) => {
    for (let k = firstEdge[from]!; k < firstEdge[from + 1]!; k++) if (target(k) === to) return edgeName(k)
    return "?"
  }
  const show = (n: number, depth: number, indent: string, via: string) => {
    console.log(`${retained[n]!.toFixed(0).padStart(7)} ${indent}${via}${label(n)}`)
    if (depth >= Number(values.depth)) return
    const kids = (children.get(n) ?? []).filter((k) => retained[k]! >= Number(values["min-bytes"])).sort((a, b) => retained[b]! - retained[a]!)
    for (const kid of kids) show(kid, depth + 1, `${indent}  `, `.${edgeTo(n, kid)} `)
  }
  // `--samples N`: N of them, evenly spaced from the smallest to the largest (owners that share a
  // label but not a shape, e.g. a request's several scopes); else the middle one.
  const wanted = Number(values.samples)
  if (wanted > 1) {
    const bySize = [...samples].sort((a, b) => retained[a]! - retained[b]!)
    console.log(`${samples.length} samples; ${wanted} from the smallest to the largest (bytes retained):`)
    for (let i = 0; i < wanted; i++) show(bySize[Math.round((i * (bySize.length - 1)) / (wanted - 1))]!, 0, "", "")
  } else {
    console.log(`${samples.length} samples; the middle one (bytes retained):`)
    show(samples[Math.floor(samples.length / 2)]!, 0, "", "")
  }
}
