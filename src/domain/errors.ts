// The one error model of every operation (keys, tokens, webhooks, replays, the read API):
// what is wrong, in domain words, and the field it concerns. Each kind carries what an edge
// needs to answer it, as Effect's HttpApi examples annotate their tagged errors: its HTTP
// status (httpApiStatus). Handlers fail with these; faces/http/errors.ts turns them into
// {"error": message} answers (the API's names for fields), faces/cli/errors.ts into CLI text
// (the flag for a field, a hint by reason).
import { ErrorReporter, Schema } from "effect"

/** A field named inside a message. Each face spells it its own way: the API as its schema
 *  names it, the CLI as its flag; `message` spells it by its domain name. */
export const FieldRef = Schema.Struct({ field: Schema.String })
export type FieldRef = typeof FieldRef.Type

export const Words = Schema.Array(Schema.Union([Schema.String, FieldRef]))
export type Words = typeof Words.Type

/** Why, where a face says more than the message (the CLI's hints about its own settings). */
export const Reason = Schema.Literals([
  "address_not_public", // a receiver's address is not public unicast nor in an allowed network
  "tls" // a receiver's certificate was not trusted
])
export type Reason = typeof Reason.Type

const fields = {
  /** The message in domain words; fields by their domain names. */
  message: Schema.String,
  /** The field the error concerns ("name", "scopes", "url", "events", "since" ...). */
  field: Schema.optional(Schema.String),
  /** The message with the fields it names marked, when it names any. */
  words: Schema.optional(Words),
  reason: Schema.optional(Reason)
}

/** The input breaks a rule: a value missing, malformed or out of range. */
export class Invalid extends Schema.TaggedError<Invalid>()("Invalid", fields, { httpApiStatus: 400 }) {}
/** The caller's credential is missing, unknown, revoked or expired, or another company's. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", fields, { httpApiStatus: 401 }) {}
/** The caller may not do this (role, tier, permission, a module turned off). */
export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", fields, { httpApiStatus: 403 }) {}
/** No such thing, or none the caller may see. */
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", fields, { httpApiStatus: 404 }) {}
/** The thing's state or a limit refuses it now (already revoked, 21st key, being sent). */
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", fields, { httpApiStatus: 409 }) {}
/** More requests than the caller's allowance in the current window; the edge says when to retry. */
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", fields, { httpApiStatus: 429 }) {}

export type DomainError = Invalid | Unauthorized | Forbidden | NotFound | Conflict | RateLimited
export type DomainErrorTag = DomainError["_tag"]

/** Every kind, for the faces that map them all (status, wording). */
export const DOMAIN_ERRORS = [Invalid, Unauthorized, Forbidden, NotFound, Conflict, RateLimited] as const

export const isDomainError = (e: unknown): e is DomainError => DOMAIN_ERRORS.some((Kind) => e instanceof Kind)

// Each is an expected outcome, answered to the caller: never reported as a failure of the service.
for (const Kind of DOMAIN_ERRORS) Object.defineProperty(Kind.prototype, ErrorReporter.ignore, { value: true })

/** A field to name in a message: words`${at("name")} must not be empty`. */
export const at = (field: string): FieldRef => ({ field })

/** A message's words from a template whose FieldRef values mark the fields it names. */
export const words = (strings: TemplateStringsArray, ...values: ReadonlyArray<string | number | FieldRef>): Words => {
  const out: Array<string | FieldRef> = []
  strings.forEach((s, i) => {
    if (s !== "") out.push(s)
    if (i < values.length) {
      const v = values[i]!
      out.push(typeof v === "object" ? v : String(v))
    }
  })
  return out
}

/** The message with each field it names spelled by `name` (a face's spelling). */
export const spell = (
  e: { readonly message: string; readonly words?: Words | undefined },
  name: (field: string) => string
): string =>
  e.words === undefined ? e.message : e.words.map((w) => (typeof w === "string" ? w : name(w.field))).join("")

type Options = { readonly field?: string; readonly reason?: Reason }

type Props = { readonly message: string; readonly field?: string; readonly words?: Words; readonly reason?: Reason }

const make =
  <E>(Class: new (props: Props) => E) =>
  (text: string | Words, options: Options = {}): E => {
    const marked = typeof text === "string" ? undefined : text
    const field = options.field ?? marked?.find((w): w is FieldRef => typeof w !== "string")?.field
    return new Class({
      message: marked === undefined ? (text as string) : spell({ message: "", words: marked }, (f) => f),
      ...(field === undefined ? {} : { field }),
      ...(marked === undefined ? {} : { words: marked }),
      ...(options.reason === undefined ? {} : { reason: options.reason })
    })
  }

// The field is the one given, else the first the words name.
export const invalid = make(Invalid)
export const unauthorized = make(Unauthorized)
export const forbidden = make(Forbidden)
export const notFound = make(NotFound)
export const conflict = make(Conflict)
export const rateLimited = make(RateLimited)
