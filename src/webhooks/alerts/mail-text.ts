// The words of an alert mail (docs/events.md#alerts-by-e-mail): one per change of a
// destination's state, and the summary of those held back by the hourly limit.
import type { AlertKind } from "../../domain/event-kinds.ts"

export type MailSubject = {
  readonly kind: "endpoint" | "subscription"
  /** An endpoint's name; null for a subscription. */
  readonly name: string | null
  readonly url: string
  readonly failures: number
  readonly lastError: string | null
  /** switched_off: "service", or the admin who did it. */
  readonly by: string | null
}

const PREFIX = "[Safety Records]"

const what = (s: MailSubject) =>
  s.kind === "endpoint" ? `The webhook endpoint "${s.name ?? s.url}"` : `The webhook subscription to ${s.url}`

export const alertMail = (kind: AlertKind, s: MailSubject): { subject: string; body: string } => {
  const lines = [`Address: ${s.url}`]
  if (s.lastError !== null) lines.push(`Last error: ${s.lastError}`)
  if (s.failures > 0) lines.push(`Deliveries that failed every attempt: ${s.failures}`)
  switch (kind) {
    case "webhook.failing":
      return {
        subject: `${PREFIX} ${what(s)} is failing`,
        body: `${what(s)} is failing: its receiver does not accept deliveries.\n\n${lines.join("\n")}\n\nDeliveries are retried on their schedule; an endpoint whose 15 deliveries in a row fail every attempt is switched off.\n`
      }
    case "webhook.recovered":
      return {
        subject: `${PREFIX} ${what(s)} has recovered`,
        body: `${what(s)} delivers again.\n\n${lines.join("\n")}\n`
      }
    case "webhook.switched_off":
      return {
        subject: `${PREFIX} ${what(s)} is switched off`,
        body: `${what(s)} was switched off${s.by !== null && s.by !== "service" ? ` by ${s.by}` : ""}: it receives no more events until it is turned on again.\n\n${lines.join("\n")}\n\nOnce the receiver is fixed, turn it on and replay what it missed.\n`
      }
  }
}

/** One mail for the alerts the hourly limit held back. */
export const summaryMail = (subjects: ReadonlyArray<string>, limit: number): { subject: string; body: string } => ({
  subject: `${PREFIX} ${subjects.length} more webhook alert${subjects.length === 1 ? "" : "s"}`,
  body: `More than ${limit} webhook alerts in an hour: these were held back and are summed up here.\n\n${subjects.map((s) => `- ${s.replace(`${PREFIX} `, "")}`).join("\n")}\n`
})
