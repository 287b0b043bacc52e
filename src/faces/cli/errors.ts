// The CLI's wording of errors: a field a message names is spelled as its flag (field "name"
// is --name, "scopes" is --read), and a hint is chosen by the error's reason. A refused or
// failed operation exits 1 (main.ts).
import { spell, type Reason, type Words } from "../../domain/errors.ts"

/** Fields whose flag is not `--` and the field's name in kebab case. */
const FLAGS: Readonly<Record<string, string>> = {
  scopes: "--read",
  admin: "--as",
  // As the usage shows a destination, with its value.
  endpoint: "--endpoint <id>",
  subscription: "--subscription <id>"
}

export const flagOf = (field: string): string =>
  FLAGS[field] ?? `--${field.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`

/** What the CLI prints for an error it stops with (a domain error, a failed check). */
export type Refusal = {
  readonly message: string
  readonly words?: Words | undefined
  readonly reason?: Reason | undefined
}

/** The message, with the fields it names spelled as flags. */
export const cliMessage = (e: Refusal): string => spell(e, flagOf)

/**
 * The CLI checks receivers as the service does, with its own environment: a refusal that the
 * service's settings would allow says which setting to give the CLI too.
 */
export const hintFor = (e: Refusal): string => {
  if (e.reason === "address_not_public" && (process.env.WEBHOOK_ALLOWED_NETWORKS ?? "").trim() === "") {
    return "\nhint: only public addresses are accepted; if the service allows a network (WEBHOOK_ALLOWED_NETWORKS, e.g. for a test receiver), give the CLI the same setting"
  }
  if (e.reason === "tls" && (process.env.NODE_EXTRA_CA_CERTS ?? "") === "") {
    return "\nhint: if the receiver's certificate comes from a private CA the service trusts (NODE_EXTRA_CA_CERTS), give the CLI the same setting"
  }
  return ""
}

/** The line (or lines, with a hint) on stderr. */
export const cliError = (e: Refusal): string => `error: ${cliMessage(e)}${hintFor(e)}`
