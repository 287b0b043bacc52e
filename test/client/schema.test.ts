// The OpenAPI document as a generator needs it (docs/integrators.md#typed-client), and the client's
// types generated from it: the document is valid OpenAPI 3.1 with webhooks, a discriminated events
// union, integer limits, event-name enums, servers, a summary and description on every operation
// and examples that match their schemas; openapi-typescript takes it without a complaint; and
// client/src/schema.d.ts is exactly what it generates now.
import SwaggerParser from "@apidevtools/swagger-parser"
import { Ajv2020 } from "ajv/dist/2020.js"
import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { apiDocument, generateSchema, SCHEMA_FILE } from "../../client/scripts/generate-schema.ts"
import {
  ALERT_KINDS,
  alertSchemaName,
  EVENT_KINDS,
  EVENT_RESOURCE,
  eventSchemaName,
  WEBHOOK_EVENTS
} from "../../src/domain/event-kinds.ts"
import { RESOURCES } from "../../src/domain/resources.ts"

const doc = apiDocument() as any
/** The payload schema's name of any event a destination may take. */
const schemaName = (k: string) =>
  (ALERT_KINDS as ReadonlyArray<string>).includes(k)
    ? alertSchemaName(k as (typeof ALERT_KINDS)[number])
    : eventSchemaName(k as (typeof EVENT_KINDS)[number])
const operations = (): Array<{ readonly where: string; readonly op: any }> =>
  [...Object.entries<any>(doc.paths), ...Object.entries<any>(doc.webhooks ?? {})].flatMap(([path, item]) =>
    Object.entries<any>(item).map(([method, op]) => ({ where: `${method.toUpperCase()} ${path}`, op }))
  )

/** Every schema object of the document with where it is, depth first. */
const schemasIn = (node: unknown, where = "#"): Array<{ readonly where: string; readonly schema: any }> => {
  if (Array.isArray(node)) return node.flatMap((n, i) => schemasIn(n, `${where}/${i}`))
  if (node === null || typeof node !== "object") return []
  return [{ where, schema: node }, ...Object.entries(node).flatMap(([k, v]) => schemasIn(v, `${where}/${k}`))]
}

describe("the OpenAPI document", () => {
  it("is valid OpenAPI 3.1", async () => {
    expect(doc.openapi).toBe("3.1.0")
    await SwaggerParser.validate(structuredClone(doc))
  })

  it("has a webhooks section: the 11 events and the 3 alerts, each with its payload and both signatures' headers", () => {
    expect(Object.keys(doc.webhooks)).toEqual([...WEBHOOK_EVENTS])
    for (const kind of ALERT_KINDS) {
      const post = doc.webhooks[kind].post
      expect(post.requestBody.content["application/json"].schema).toEqual({
        $ref: `#/components/schemas/${alertSchemaName(kind)}`
      })
      expect(post.parameters.find((p: any) => p.name === "Service-Event").schema.enum).toEqual([kind])
      const payload = doc.components.schemas[alertSchemaName(kind)]
      expect(payload.properties.event).toMatchObject({ enum: [kind] })
      expect(payload.properties.data).toEqual({ $ref: "#/components/schemas/WebhookAlert" })
    }
    const alert = doc.components.schemas.WebhookAlert
    expect(Object.keys(alert.properties)).toEqual([
      "destination",
      "failedDeliveries",
      "lastError",
      "lastAttemptAt",
      "switchedOffAt",
      "switchedOffBy"
    ])
    expect(alert.properties.failedDeliveries.type).toBe("integer")
    expect(Object.keys(alert.properties.destination.properties)).toEqual(["kind", "id", "url", "events"])
    for (const kind of EVENT_KINDS) {
      const post = doc.webhooks[kind].post
      expect(post.requestBody.content["application/json"].schema).toEqual({
        $ref: `#/components/schemas/${eventSchemaName(kind)}`
      })
      const headers = post.parameters.filter((p: any) => p.in === "header").map((p: any) => p.name)
      expect(headers).toEqual(
        expect.arrayContaining([
          "webhook-id",
          "webhook-timestamp",
          "webhook-signature",
          "Service-Signature",
          "Service-Event",
          "Service-Delivery"
        ])
      )
      expect(post.parameters.find((p: any) => p.name === "Service-Event").schema.enum).toEqual([kind])
      const payload = doc.components.schemas[eventSchemaName(kind)]
      expect(payload.properties.event).toMatchObject({ enum: [kind] })
      const record = RESOURCES.find((r) => r === EVENT_RESOURCE[kind])!
      const recordRef =
        doc.paths[`/api/v1/${record}/{id}`].get.responses["200"].content["application/json"].schema.properties.data
      // The record as GET returns it or, deleted since, its identifiers only (docs/privacy.md).
      const deletedRef = { $ref: recordRef.$ref.replace("/schemas/", "/schemas/Deleted") }
      expect(payload.properties.data).toEqual({ anyOf: [recordRef, deletedRef] })
      const deleted = doc.components.schemas[deletedRef.$ref.split("/").at(-1)]
      const fields = doc.components.schemas[recordRef.$ref.split("/").at(-1)].properties
      expect(Object.keys(deleted.properties)).toEqual(Object.keys(fields))
      for (const [field, schema] of Object.entries<any>(deleted.properties))
        if (!["id", "companyId", "reference"].includes(field)) expect(schema, field).toEqual({ type: "null" })
      expect(Object.keys(post.responses)).toEqual(expect.arrayContaining(["2XX", "410"]))
    }
  })

  it("the events feed's payload is a union discriminated by event", () => {
    const event = doc.components.schemas.Event
    expect(event.anyOf).toBeUndefined()
    expect(event.oneOf).toEqual(WEBHOOK_EVENTS.map((k) => ({ $ref: `#/components/schemas/${schemaName(k)}` })))
    expect(event.discriminator).toEqual({
      propertyName: "event",
      mapping: Object.fromEntries(WEBHOOK_EVENTS.map((k) => [k, `#/components/schemas/${schemaName(k)}`]))
    })
    const items =
      doc.paths["/api/v1/events"].get.responses["200"].content["application/json"].schema.properties.data.items
    expect(items).toEqual({ $ref: "#/components/schemas/Event" })
  })

  it("limit is an integer wherever it is taken, and event names an enum", () => {
    let limits = 0
    for (const { where, op } of operations()) {
      for (const p of op.parameters ?? []) {
        if (p.name === "limit") {
          limits++
          // The stream's answers hold up to 1,000 changes (100 by default).
          const stream = where.endsWith("/stream")
          expect([where, p.schema.type, p.schema.minimum, p.schema.maximum, p.schema.default]).toEqual([
            where,
            "integer",
            1,
            stream ? 1000 : 200,
            stream ? 100 : 50
          ])
        }
      }
    }
    expect(limits).toBe(RESOURCES.length + 5) // the lists, events, deletions, a subscription's deliveries, the stream and a consumer's
    // Every field that holds an event name enumerates event names: the 14 payloads' event (and
    // an alert's destination's events), the subscriptions' event, the index's and hook list's
    // events, a delivery's event (in the list and alone).
    const eventNames = new Set<string>(WEBHOOK_EVENTS)
    const fields = schemasIn(doc).filter(({ where }) => /\/properties\/(event|events\/items)$/.test(where))
    for (const { where, schema } of fields) {
      expect(schema.type, where).toBe("string")
      expect(schema.enum?.length, where).toBeGreaterThan(0)
      for (const e of schema.enum) expect(eventNames.has(e), `${where}: ${e}`).toBe(true)
    }
    expect(fields.length).toBe(WEBHOOK_EVENTS.length + 8)
    for (const name of ["HookDelivery", "HookDeliveryDetail"])
      expect(doc.components.schemas[name].properties.event, name).toMatchObject({
        type: "string",
        enum: [...WEBHOOK_EVENTS]
      })
    const typeParam = doc.paths["/api/v1/events"].get.parameters.find((p: any) => p.name === "type")
    expect(typeParam.schema).toMatchObject({ type: "string", enum: [...WEBHOOK_EVENTS] })
    expect(doc.components.schemas.CreateHook.properties.event).toMatchObject({
      type: "string",
      enum: [...WEBHOOK_EVENTS]
    })
    expect(doc.components.schemas.HookSubscription.properties.event).toMatchObject({
      type: "string",
      enum: [...WEBHOOK_EVENTS]
    })
    expect(doc.components.schemas.HookList.properties.events.items).toMatchObject({
      type: "string",
      enum: [...WEBHOOK_EVENTS]
    })
    expect(doc.components.schemas.ApiIndex.properties.events.items).toMatchObject({
      type: "string",
      enum: [...WEBHOOK_EVENTS]
    })
    for (const { where, schema } of schemasIn(doc)) {
      if (Array.isArray(schema.allOf) && schema.type !== undefined)
        throw new Error(`${where}: {type, allOf} left in the document`)
    }
  })

  it("has servers, and a summary and a description on every operation", () => {
    expect(doc.servers.map((s: any) => s.url)).toEqual(["/", "https://{host}"])
    const ops = operations()
    // the resources, the index, hooks, events, deletions, the event payloads, a key's deliveries and recovery,
    // the stream and its consumers (list, put, get, delete, stream, ack)
    expect(ops.length).toBe(RESOURCES.length * 2 + 1 + 4 + 2 + 1 + WEBHOOK_EVENTS.length + 5 + 7)
    for (const { where, op } of ops) {
      expect(typeof op.summary === "string" && op.summary.length > 3, `${where} summary`).toBe(true)
      expect(typeof op.description === "string" && op.description.length > 20, `${where} description`).toBe(true)
    }
  })

  it("the main schemas have examples, and every example matches its schema", () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false })
    ajv.addSchema({ $id: "doc.json", components: doc.components })
    const main = [
      ...new Set(
        RESOURCES.map((r) =>
          doc.paths[`/api/v1/${r}/{id}`].get.responses["200"].content["application/json"].schema.properties.data.$ref
            .split("/")
            .at(-1)
        )
      )
    ]
    expect(main).toHaveLength(14)
    for (const name of [
      ...main,
      ...EVENT_KINDS.map(eventSchemaName),
      "Deletion",
      "HookSubscription",
      "HookSubscriptionWithSecret",
      "CreateHook",
      "HookList",
      "ApiIndex"
    ]) {
      expect(doc.components.schemas[name]?.examples?.length, name).toBeGreaterThan(0)
    }
    let checked = 0
    for (const [name, schema] of Object.entries<any>(doc.components.schemas)) {
      for (const example of schema.examples ?? []) {
        const validate = ajv.getSchema(`doc.json#/components/schemas/${name}`)!
        expect(validate(example), `${name}: ${ajv.errorsText(validate.errors)}`).toBe(true)
        checked++
      }
    }
    expect(checked).toBeGreaterThanOrEqual(14 + 11 + 6)
    // An example that breaks its schema is caught.
    const incident = ajv.getSchema("doc.json#/components/schemas/Incident")!
    expect(incident({ ...doc.components.schemas.Incident.examples[0], severity: "apocalyptic" })).toBe(false)
  })
})

describe("the client's types", () => {
  it("openapi-typescript generates them from the document without a complaint of its lint (Redocly's recommended rules)", async () => {
    const { source, problems } = await generateSchema()
    expect(problems).toEqual([])
    expect(source).toContain("export interface webhooks {")
    expect(source).toContain('readonly "permit.closed": {')
    expect(source).toMatch(/readonly limit\?: number;/)
    expect(source).toMatch(/readonly Event: components\["schemas"\]\["IncidentCreatedEvent"\] \| /)
    // Erasable syntax only: the client runs under Node's type stripping.
    expect(source).not.toMatch(/^\s*(export )?(declare )?(const )?enum /m)
  })

  it("client/src/schema.d.ts is what the document gives now (else: npm run client:generate)", async () => {
    const { source } = await generateSchema()
    const committed = readFileSync(SCHEMA_FILE, "utf8")
    expect(
      committed === source,
      "client/src/schema.d.ts differs from the document: run npm run client:generate and commit it"
    ).toBe(true)
  })

  it("the check sees a document that changed", async () => {
    const changed = structuredClone(doc)
    changed.components.schemas.Incident.properties.title.description = "A different title"
    const { source } = await generateSchema(changed)
    expect(source).not.toBe(readFileSync(SCHEMA_FILE, "utf8"))
    // The lint before generating: a warning is reported, an error throws.
    const untagged = structuredClone(doc)
    delete untagged.tags.find((t: any) => t.name === "incidents").description
    expect((await generateSchema(untagged)).problems.join("\n")).toMatch(/description/)
    const unsummarised = structuredClone(doc)
    delete unsummarised.paths["/api/v1/incidents"].get.summary
    await expect(generateSchema(unsummarised)).rejects.toThrow(/summary/)
    const broken = structuredClone(doc)
    broken.paths["/api/v1/incidents"].get.responses["200"].content["application/json"].schema = {
      $ref: "#/components/schemas/Nope"
    }
    await expect(generateSchema(broken)).rejects.toThrow(/Nope|resolve/i)
  })
})
