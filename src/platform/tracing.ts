// Traces: OpenTelemetry through Effect's tracer (@effect/opentelemetry), batched and sent
// over OTLP/HTTP (JSON) to OTEL_EXPORTER_OTLP_ENDPOINT (/v1/traces under it, or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). Off unless OTEL_EXPORTER_OTLP_ENDPOINT is set: then no
// tracer is installed, nothing is exported, and the OpenTelemetry packages are not even
// loaded. The SDK reads the other standard variables itself (OTEL_EXPORTER_OTLP_HEADERS,
// OTEL_BSP_* batching); OTEL_SERVICE_NAME names the service.
//
// Spans: one per HTTP request (Effect's HTTP server makes it; http.ts names it by route and
// the request middleware adds the route, request id and key id), one per capture batch (with
// the ids of the events it wrote), and the helpers below for the delivery engine's fan-out
// and attempts.
import { createRequire } from "node:module"
import { Config, Context, Effect, Layer, Option } from "effect"

const VERSION: string = (createRequire(import.meta.url)("../../package.json") as { version: string }).version

export const TracingConfig = Config.all({
  endpoint: Config.option(Config.String("OTEL_EXPORTER_OTLP_ENDPOINT")),
  /** The standard override of where traces go; default: /v1/traces under the endpoint. */
  tracesEndpoint: Config.option(Config.String("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")),
  serviceName: Config.String("OTEL_SERVICE_NAME").pipe(Config.withDefault("safety-records-service"))
})

/** True where TracingLive installed an exporting tracer: plain (Promise) code makes spans only then. */
export const TracingEnabled = Context.Reference<boolean>("service/TracingEnabled", { defaultValue: () => false })

/** Installs the tracer when OTEL_EXPORTER_OTLP_ENDPOINT is set; spans still queued are sent at shutdown. */
export const TracingLive = Layer.unwrap(
  Effect.gen(function* () {
    const config = yield* TracingConfig
    const endpoint = Option.getOrElse(config.endpoint, () => "").trim()
    if (endpoint === "") return Layer.empty
    const url = Option.getOrElse(config.tracesEndpoint, () => `${endpoint.replace(/\/+$/, "")}/v1/traces`)
    const [{ OTLPTraceExporter }, { BasicTracerProvider, BatchSpanProcessor }, OtelTracer, Resource] =
      yield* Effect.promise(() =>
        Promise.all([
          import("@opentelemetry/exporter-trace-otlp-http"),
          import("@opentelemetry/sdk-trace-base"),
          import("@effect/opentelemetry/OtelTracer"),
          import("@effect/opentelemetry/Resource")
        ])
      )
    const provider = Layer.effect(
      OtelTracer.OtelTracerProvider,
      Effect.gen(function* () {
        const resource = yield* Resource.Resource
        return yield* Effect.acquireRelease(
          Effect.sync(
            () =>
              new BasicTracerProvider({
                resource,
                spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url }))]
              })
          ),
          (p) =>
            Effect.promise(() => p.forceFlush().then(() => p.shutdown())).pipe(
              Effect.timeoutOption("5 seconds"),
              Effect.ignore
            )
        )
      })
    ).pipe(Layer.provide(Resource.layer({ serviceName: config.serviceName, serviceVersion: VERSION })))
    yield* Effect.logInfo("tracing on: spans go to the OTLP endpoint", {
      endpoint: url,
      serviceName: config.serviceName
    })
    return Layer.mergeAll(OtelTracer.layer, Layer.succeed(TracingEnabled, true)).pipe(Layer.provide(provider))
  })
)

/** Runs a Promise-returning function in a span; `annotate` adds attributes once they are known. */
export type SpanRunner = <A>(
  name: string,
  attributes: Readonly<Record<string, unknown>>,
  f: (annotate: (key: string, value: unknown) => void) => Promise<A>
) => Promise<A>

/** For code outside Effect (capture): spans of the current tracer, or undefined when tracing is off (no cost then). */
export const spanRunner: Effect.Effect<SpanRunner | undefined> = Effect.gen(function* () {
  if (!(yield* TracingEnabled)) return undefined
  const run = Effect.runPromiseWith(yield* Effect.context<never>())
  return <A>(
    name: string,
    attributes: Readonly<Record<string, unknown>>,
    f: (annotate: (key: string, value: unknown) => void) => Promise<A>
  ) =>
    run(
      Effect.withSpan(
        Effect.flatMap(Effect.currentSpan, (span) =>
          Effect.tryPromise({ try: () => f((key, value) => span.attribute(key, value)), catch: (e) => e })
        ),
        name,
        { attributes }
      )
    )
})

/**
 * The delivery engine's hook (docs/operations.md#traces): the span of one delivery attempt, carrying its
 * delivery and event ids. `attempt` counts from 1.
 *
 *   sendOne(claimed).pipe(withDeliverySpan({ deliveryId, eventId, endpointId, attempt }))
 */
export const withDeliverySpan =
  (ids: {
    readonly deliveryId: string
    readonly eventId: string
    readonly event?: string | undefined
    readonly endpointId?: string | null | undefined
    readonly subscriptionId?: string | null | undefined
    readonly attempt?: number | undefined
  }) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.withSpan(self, "webhook.delivery", {
      kind: "client",
      attributes: {
        "delivery.id": ids.deliveryId,
        "event.id": ids.eventId,
        ...(ids.event === undefined ? {} : { "event.type": ids.event }),
        ...(ids.endpointId == null ? {} : { "endpoint.id": ids.endpointId }),
        ...(ids.subscriptionId == null ? {} : { "subscription.id": ids.subscriptionId }),
        ...(ids.attempt === undefined ? {} : { "delivery.attempt": ids.attempt })
      }
    })

/**
 * The delivery engine's hook for one fan-out round: the events it turned into deliveries.
 * Ids known only at the end (the deliveries made) are added with `annotateFanout`.
 */
export const withFanoutSpan =
  (ids: { readonly eventIds?: ReadonlyArray<string> | undefined } = {}) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.withSpan(self, "webhook.fanout", {
      kind: "producer",
      attributes:
        ids.eventIds === undefined
          ? {}
          : { "event.ids": ids.eventIds.slice(0, 100), "fanout.events": ids.eventIds.length }
    })

/** Adds what a fan-out made to its span (inside withFanoutSpan). */
export const annotateFanout = (made: {
  readonly events: number
  readonly deliveryIds?: ReadonlyArray<string> | undefined
}) =>
  Effect.annotateCurrentSpan({
    "fanout.events": made.events,
    ...(made.deliveryIds === undefined
      ? {}
      : { "delivery.ids": made.deliveryIds.slice(0, 100), "fanout.deliveries": made.deliveryIds.length })
  })
