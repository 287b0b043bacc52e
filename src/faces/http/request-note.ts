// What a request's handlers tell its log line and its trace span, both written by the
// request middleware (src/faces/http/requests.ts) once the answer is known: the API key
// that made the request, by id. Never the key itself.
import { Context, Effect } from "effect"

export interface RequestNoteShape {
  keyId: string | undefined
}

/** Provided per request by the middleware; absent where no middleware runs (tests of one handler). */
export const RequestNote = Context.Reference<RequestNoteShape | undefined>("service/http/RequestNote", {
  defaultValue: () => undefined
})

/** Names the key that made this request (the auth middleware, once it knows the key). */
export const noteKeyId = (keyId: string): Effect.Effect<void> =>
  Effect.map(Effect.service(RequestNote), (note) => {
    if (note !== undefined) note.keyId = keyId
  })
