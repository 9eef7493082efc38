import { describe, expect, it } from "vitest"
import type { JsonObject } from "../../src/util/json.ts"
import { sampleJsonSchema } from "../../src/backends/simulator/json-schema-sample.ts"
import { makePrng } from "../../src/backends/simulator/prng.ts"
import { validateJsonSchema } from "./validate-json-schema.ts"

const schemas: Record<string, JsonObject> = {
  flat: {
    type: "object",
    properties: {
      city: { type: "string", minLength: 3, maxLength: 12 },
      unit: { enum: ["celsius", "fahrenheit"] },
      days: { type: "integer", minimum: 1, maximum: 7 },
      verbose: { type: "boolean" }
    },
    required: ["city", "days"],
    additionalProperties: false
  },
  numbers: {
    type: "object",
    properties: {
      ratio: { type: "number", exclusiveMinimum: 0, exclusiveMaximum: 1 },
      step: { type: "number", minimum: 10, maximum: 11, multipleOf: 0.25 },
      even: { type: "integer", minimum: 3, maximum: 9, multipleOf: 2 },
      negative: { type: "integer", maximum: -5 }
    },
    required: ["ratio", "step", "even", "negative"]
  },
  // A type's limits, not a field's meaning: zod's `.int()` (±2^53 − 1), an int32, a wide range
  // of large steps, and wide ranges that leave no room near 0.
  wide: {
    type: "object",
    properties: {
      age: { type: "integer", minimum: -9007199254740991, maximum: 9007199254740991 },
      count: { type: "integer", minimum: -2147483648, maximum: 2147483647 },
      price: { type: "number", minimum: -1e12, maximum: 1e12 },
      thousands: { type: "integer", minimum: 5001, maximum: 10_000_000, multipleOf: 1000 },
      far: { type: "integer", minimum: 1_000_000, maximum: 9_000_000 },
      below: { type: "number", exclusiveMinimum: -1e9, exclusiveMaximum: -500 }
    },
    required: ["age", "count", "price", "thousands", "far", "below"]
  },
  nested: {
    type: "object",
    properties: {
      order: {
        type: "object",
        properties: {
          id: { type: "string", format: "uuid" },
          placedAt: { type: "string", format: "date-time" },
          contact: { type: "string", format: "email" },
          items: {
            type: "array",
            minItems: 2,
            maxItems: 4,
            items: {
              type: "object",
              properties: { sku: { type: "string" }, quantity: { type: "integer", minimum: 1 } },
              required: ["sku", "quantity"],
              additionalProperties: false
            }
          },
          tags: { type: "array", items: { enum: ["a", "b", "c"] }, uniqueItems: true, minItems: 2 }
        },
        required: ["id", "placedAt", "contact", "items", "tags"]
      }
    },
    required: ["order"]
  },
  refsAndUnions: {
    $defs: { point: { type: "object", properties: { x: { type: "number" }, y: { type: "number" } }, required: ["x", "y"] } },
    type: "object",
    properties: {
      start: { $ref: "#/$defs/point" },
      label: { anyOf: [{ type: "null" }, { type: "string", maxLength: 5 }] },
      mode: { const: "fast" },
      nullable: { type: ["null", "integer"], minimum: 2, maximum: 2 },
      merged: { allOf: [{ type: "object", properties: { a: { type: "string" } }, required: ["a"] }, { properties: { b: { type: "integer" } }, required: ["b"] }] }
    },
    required: ["start", "label", "mode", "nullable", "merged"]
  },
  defaults: {
    type: "object",
    properties: { retries: { type: "integer", default: 3 }, name: { type: "string", examples: ["alpha"] } },
    required: ["retries", "name"],
    minProperties: 2
  }
}

describe("sampleJsonSchema", () => {
  for (const [name, schema] of Object.entries(schemas)) {
    it(`produces values that validate against the ${name} schema across seeds`, () => {
      for (let seed = 0; seed < 200; seed++) {
        const value = sampleJsonSchema(schema, makePrng(seed))
        expect(validateJsonSchema(value, schema), JSON.stringify(value)).toEqual([])
      }
    })
  }

  it("answers a type's wide limits with values near 0, as a model would, inside the bounds", () => {
    const values = Array.from({ length: 200 }, (_, seed) => sampleJsonSchema(schemas.wide, makePrng(seed)) as Record<string, number>)
    const range = (key: string) => [Math.min(...values.map((v) => v[key]!)), Math.max(...values.map((v) => v[key]!))]
    expect(range("age")).toEqual([0, 100])
    expect(range("count")).toEqual([0, 100])
    expect(range("price")[0]).toBeGreaterThanOrEqual(0)
    expect(range("price")[1]).toBeLessThanOrEqual(100)
    // The window starts at the lowest bound when 0 is below it; it spans two steps when a step is large.
    expect(range("far")).toEqual([1_000_000, 1_000_100])
    expect(range("thousands")).toEqual([6000, 7000])
    expect(range("below")[0]).toBeGreaterThanOrEqual(-600)
    expect(range("below")[1]).toBeLessThan(-500)
    // Values still vary inside the window.
    expect(new Set(values.map((v) => v.far)).size).toBeGreaterThan(50)
  })

  it("uses defaults and examples when given", () => {
    expect(sampleJsonSchema(schemas.defaults, makePrng(1))).toEqual({ retries: 3, name: "alpha" })
  })

  it("is deterministic for a seed and varies across seeds", () => {
    const a = JSON.stringify(sampleJsonSchema(schemas.nested, makePrng(7)))
    expect(JSON.stringify(sampleJsonSchema(schemas.nested, makePrng(7)))).toBe(a)
    const distinct = new Set(Array.from({ length: 20 }, (_, seed) => JSON.stringify(sampleJsonSchema(schemas.nested, makePrng(seed)))))
    expect(distinct.size).toBeGreaterThan(10)
  })

  it("terminates on recursive schemas", () => {
    const tree: JsonObject = {
      $defs: { node: { type: "object", properties: { children: { type: "array", items: { $ref: "#/$defs/node" } } } } },
      $ref: "#/$defs/node"
    }
    for (let seed = 0; seed < 50; seed++) {
      expect(validateJsonSchema(sampleJsonSchema(tree, makePrng(seed)), tree)).toEqual([])
    }
  })

  it("the test validator rejects what the sampler must not produce", () => {
    expect(validateJsonSchema({ city: "x", extra: 1 }, schemas.flat)).toHaveLength(3)
  })
})
