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
