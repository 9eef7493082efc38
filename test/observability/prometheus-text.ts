/**
 * A parser of the Prometheus text exposition format (0.0.4), strict enough that a malformed line
 * fails the test: `# HELP`/`# TYPE` comments, then samples `name{label="value",…} number`, label
 * values with `\\`, `\"` and `\n` escapes.
 */
export interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

export interface Exposition {
  readonly types: ReadonlyMap<string, string>
  readonly samples: ReadonlyArray<Sample>
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/

const parseValue = (text: string): number => {
  if (text === "+Inf") return Infinity
  if (text === "-Inf") return -Infinity
  if (text === "NaN") return NaN
  if (!/^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(text)) throw new Error(`not a sample value: ${text}`)
  return Number(text)
}

const parseLabels = (text: string, line: string): { labels: Record<string, string>; rest: string } => {
  const labels: Record<string, string> = {}
  let at = 1 // after "{"
  while (text[at] !== "}") {
    const name = LABEL_NAME.exec(text.slice(at))?.[0]
    if (name === undefined || text[at + name.length] !== "=" || text[at + name.length + 1] !== "\"") throw new Error(`bad label in: ${line}`)
    at += name.length + 2
    let value = ""
    while (text[at] !== "\"") {
      if (at >= text.length) throw new Error(`unterminated label value in: ${line}`)
      if (text[at] === "\\") {
        const next = text[at + 1]
        value += next === "n" ? "\n" : next
        at += 2
      } else {
        value += text[at]
        at++
      }
    }
    at++ // closing quote
    if (name in labels) throw new Error(`duplicate label ${name} in: ${line}`)
    labels[name] = value
    if (text[at] === ",") at++
    else if (text[at] !== "}") throw new Error(`bad label separator in: ${line}`)
  }
  return { labels, rest: text.slice(at + 1) }
}

export const parsePrometheus = (text: string): Exposition => {
  const types = new Map<string, string>()
  const samples: Array<Sample> = []
  if (text !== "" && !text.endsWith("\n")) throw new Error("the exposition must end with a newline")
  for (const line of text.split("\n")) {
    if (line === "") continue
    if (line.startsWith("#")) {
      const m = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line)
      if (m === null) throw new Error(`bad comment line: ${line}`)
      if (m[1] === "TYPE") {
        if (!["counter", "gauge", "histogram", "summary", "untyped"].includes(m[3])) throw new Error(`bad type: ${line}`)
        if (types.has(m[2])) throw new Error(`TYPE given twice for ${m[2]}`)
        types.set(m[2], m[3])
      }
      continue
    }
    const name = NAME.exec(line)?.[0]
    if (name === undefined) throw new Error(`bad sample line: ${line}`)
    let rest = line.slice(name.length)
    let labels: Record<string, string> = {}
    if (rest.startsWith("{")) ({ labels, rest } = parseLabels(rest, line))
    if (!rest.startsWith(" ")) throw new Error(`no value in: ${line}`)
    const [value, timestamp, ...extra] = rest.slice(1).split(" ")
    if (extra.length > 0 || (timestamp !== undefined && !/^-?\d+$/.test(timestamp))) throw new Error(`bad sample tail: ${line}`)
    samples.push({ name, labels, value: parseValue(value) })
  }
  return { types, samples }
}

const matches = (sample: Sample, labels: Readonly<Record<string, string>>) => Object.entries(labels).every(([k, v]) => sample.labels[k] === v)

/** The value of the one sample with this name and (at least) these labels; 0 when absent. */
export const valueOf = (exposition: Exposition, name: string, labels: Readonly<Record<string, string>> = {}): number => {
  const found = exposition.samples.filter((s) => s.name === name && matches(s, labels))
  if (found.length > 1) throw new Error(`${name} ${JSON.stringify(labels)} matches ${found.length} samples`)
  return found[0]?.value ?? 0
}

/** Sum over every sample with this name and (at least) these labels. */
export const sumOf = (exposition: Exposition, name: string, labels: Readonly<Record<string, string>> = {}): number =>
  exposition.samples.filter((s) => s.name === name && matches(s, labels)).reduce((sum, s) => sum + s.value, 0)

/**
 * A histogram's series with these exact labels: its buckets (cumulative, by `le`), sum and count.
 * Checks the shape Prometheus requires: buckets non-decreasing, ending at +Inf equal to the count.
 */
export const histogramOf = (exposition: Exposition, name: string, labels: Readonly<Record<string, string>>) => {
  const same = (s: Sample) => {
    const { le: _le, ...rest } = s.labels
    return Object.keys(rest).length === Object.keys(labels).length && matches(s, labels)
  }
  const buckets = exposition.samples.filter((s) => s.name === `${name}_bucket` && same(s))
    .map((s) => ({ le: parseValue(s.labels.le), count: s.value }))
  const count = exposition.samples.find((s) => s.name === `${name}_count` && same(s))?.value ?? 0
  const sum = exposition.samples.find((s) => s.name === `${name}_sum` && same(s))?.value ?? 0
  if (buckets.length > 0) {
    for (let i = 1; i < buckets.length; i++) {
      if (!(buckets[i].le > buckets[i - 1].le)) throw new Error(`${name}: bucket bounds not increasing`)
      if (buckets[i].count < buckets[i - 1].count) throw new Error(`${name}: cumulative counts decrease`)
    }
    const last = buckets[buckets.length - 1]
    if (last.le !== Infinity || last.count !== count) throw new Error(`${name}: the +Inf bucket must equal the count`)
  }
  return { buckets, count, sum }
}
