// Liveness: the process is up and its event loop answers. Readiness lives with capture.
import { HttpRouter, HttpServerResponse } from "effect/http"

export const HealthRoutes = HttpRouter.add("GET", "/healthz", HttpServerResponse.jsonUnsafe({ status: "ok" }))
