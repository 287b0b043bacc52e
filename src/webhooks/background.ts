// What SERVICE_ROLES' `delivery` runs: the delivery engine, and beside it the replay lane (at
// REPLAY_RATE per destination, behind live deliveries) and the alert mails, as one Layer. Their loops run under
// the process's supervisor: the lane starts after the engine and stops before it.
import { Layer } from "effect"
import { EngineLive } from "./engine/engine.ts"
import { ReplayLaneLive } from "./replay/lane.ts"
import { MailerLive } from "./alerts/mail.ts"

export const DeliveryLive = Layer.mergeAll(ReplayLaneLive, MailerLive).pipe(Layer.provideMerge(EngineLive))
