// A stub OpenTelemetry collector: OTLP/HTTP with JSON bodies on loopback (POST /v1/traces),
// keeping every span it receives with its attributes flattened, and the raw bodies.
import { createServer } from "node:http"

export interface ReceivedSpan {
  readonly name: string
  readonly kind: number
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  readonly attributes: Readonly<Record<string, unknown>>
  readonly service: string | undefined
}

export interface OtlpCollector {
  /** What OTEL_EXPORTER_OTLP_ENDPOINT is set to. */
  readonly endpoint: string
  readonly spans: ReadonlyArray<ReceivedSpan>
  readonly bodies: ReadonlyArray<string>
  readonly close: () => Promise<void>
}

interface AnyValue {
  readonly stringValue?: string
  readonly intValue?: string | number
  readonly doubleValue?: number
  readonly boolValue?: boolean
  readonly arrayValue?: { readonly values?: ReadonlyArray<AnyValue> }
}
interface KeyValue {
  readonly key: string
  readonly value: AnyValue
}

const otlpValue = (v: AnyValue): unknown =>
  v.stringValue ??
  (v.intValue !== undefined ? Number(v.intValue) : undefined) ??
  v.doubleValue ??
  v.boolValue ??
  (v.arrayValue ? (v.arrayValue.values ?? []).map(otlpValue) : undefined)

const flatten = (attributes: ReadonlyArray<KeyValue> | undefined) =>
  Object.fromEntries((attributes ?? []).map((a) => [a.key, otlpValue(a.value)]))

export const startOtlpCollector = async (): Promise<OtlpCollector> => {
  const spans: ReceivedSpan[] = []
  const bodies: string[] = []
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8")
      if (
        req.method !== "POST" ||
        req.url !== "/v1/traces" ||
        !(req.headers["content-type"] ?? "").startsWith("application/json")
      ) {
        res.writeHead(404).end()
        return
      }
      bodies.push(body)
      const parsed = JSON.parse(body) as {
        resourceSpans?: Array<{
          resource?: { attributes?: KeyValue[] }
          scopeSpans?: Array<{
            spans?: Array<{
              name: string
              kind: number
              traceId: string
              spanId: string
              parentSpanId?: string
              attributes?: KeyValue[]
            }>
          }>
        }>
      }
      for (const rs of parsed.resourceSpans ?? []) {
        const service = flatten(rs.resource?.attributes)["service.name"] as string | undefined
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            spans.push({
              name: s.name,
              kind: s.kind,
              traceId: s.traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId || undefined,
              attributes: flatten(s.attributes),
              service
            })
          }
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}")
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const port = (server.address() as { port: number }).port
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    bodies,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}
