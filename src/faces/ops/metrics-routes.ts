// GET /metrics: the registry in Prometheus text format 0.0.4. Building the route registers
// the collectors for whatever runs in this process (capture, delivery; the database's
// figures everywhere), so it belongs
// beside the other routes, above capture and delivery in the composition root.
import { Effect, Layer, Option } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { Capture } from "../../pipeline/capture/Capture.ts"
import { DeliveryEngine } from "../../webhooks/engine/engine.ts"
import {
  captureOff,
  collectCapture,
  collectDatabase,
  collectDelivery,
  collectKeys,
  collectReplicas,
  collectStream,
  Metrics
} from "./metrics.ts"
import { ApiKeys } from "../../access/keys/service.ts"
import { ReadReplicas } from "../../platform/db/read-replicas.ts"
import { StreamFeed } from "../../read/stream.ts"
import { PROMETHEUS_CONTENT_TYPE } from "../../platform/metrics/registry.ts"

export const METRICS_PATH = "/metrics"

export const MetricsRoutes = Layer.unwrap(
  Effect.gen(function* () {
    const m = yield* Metrics
    const capture = yield* Effect.serviceOption(Capture)
    const engine = yield* Effect.serviceOption(DeliveryEngine)
    const keys = yield* Effect.serviceOption(ApiKeys)
    const removeDatabase = yield* collectDatabase(m)
    yield* Effect.addFinalizer(() => Effect.sync(removeDatabase))
    if (Option.isSome(capture)) {
      const remove = yield* collectCapture(m, capture.value.stats, capture.value.slot)
      yield* Effect.addFinalizer(() => Effect.sync(remove))
    } else captureOff(m)
    const replicas = yield* ReadReplicas
    if (replicas.report().length > 0) {
      const remove = collectReplicas(m, replicas)
      yield* Effect.addFinalizer(() => Effect.sync(remove))
    }
    if (Option.isSome(engine)) {
      const stats = engine.value.stats
      const remove = collectDelivery(m, () => Effect.runPromise(stats))
      yield* Effect.addFinalizer(() => Effect.sync(remove))
    }
    if (Option.isSome(keys)) {
      const remove = collectKeys(m, keys.value.stats)
      yield* Effect.addFinalizer(() => Effect.sync(remove))
    }
    const stream = yield* Effect.serviceOption(StreamFeed)
    if (Option.isSome(stream)) {
      const remove = collectStream(m, stream.value.core.wake.counts)
      yield* Effect.addFinalizer(() => Effect.sync(remove))
    }
    return HttpRouter.add(
      "GET",
      METRICS_PATH,
      Effect.promise(() => m.registry.scrape()).pipe(
        Effect.map((text) => HttpServerResponse.text(text, { contentType: PROMETHEUS_CONTENT_TYPE }))
      )
    )
  })
)
