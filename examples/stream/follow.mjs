// Keeps a local copy of every record a key may read, in step with the service, by following
// GET /api/v1/stream (docs/integrators.md#following-the-stream). Plain Node (18+), no dependencies.
//
//   API_URL=https://acme.example.com API_KEY=mk_... node follow.mjs [--state copy.json] [--once]
//
// The copy and the offset it has reached live in one JSON file, written whole to a temporary file
// and renamed over the old one after each answer is applied: killed at any moment, the file holds
// a copy and the offset that copy is complete up to, and the next run resumes from there (a change
// applied twice does no harm: each is the record's whole state). The first run (or after a 409
// with mustRefetch) takes the present offset (after=now), then copies every list, then follows.
// --once: stop once caught up (for a cron job), instead of waiting for changes for ever.
import { readFileSync, renameSync, writeFileSync } from "node:fs"

const API_URL = (process.env.API_URL ?? "").replace(/\/+$/, "")
const API_KEY = process.env.API_KEY ?? ""
const args = process.argv.slice(2)
const option = (name, fallback) => {
  const i = args.indexOf(name)
  return i >= 0 ? args[i + 1] : fallback
}
const STATE = option("--state", "copy.json")
const ONCE = args.includes("--once")
if (!API_URL || !API_KEY.startsWith("mk_")) {
  console.error("Usage: API_URL=https://... API_KEY=mk_... node follow.mjs [--state copy.json] [--once]")
  process.exit(2)
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

class MustRefetch extends Error {}

/** One request; 429 and network failures are tried again, a 409 with mustRefetch is thrown. */
const api = async (path) => {
  for (let attempt = 0; ; attempt++) {
    let res
    try {
      res = await fetch(`${API_URL}${path}`, {
        headers: { authorization: `Bearer ${API_KEY}`, accept: "application/json" }
      })
    } catch (e) {
      console.error(`request failed (${e.cause?.code ?? e.message}); trying again`)
      await sleep(Math.min(30_000, 500 * 2 ** Math.min(attempt, 6)))
      continue
    }
    const body = await res.json().catch(() => ({}))
    if (res.ok) return body
    if (res.status === 409 && body.mustRefetch === true) throw new MustRefetch(body.error)
    if (res.status === 429 || res.status >= 500) {
      await sleep(Number(res.headers.get("retry-after") ?? 1) * 1000)
      continue
    }
    throw new Error(`${path}: ${res.status} ${body.error ?? ""}`)
  }
}

const load = () => {
  try {
    return JSON.parse(readFileSync(STATE, "utf8"))
  } catch {
    return undefined
  }
}

/** The copy and its offset, replaced together (rename is atomic). */
const save = (state) => {
  writeFileSync(`${STATE}.tmp`, JSON.stringify(state))
  renameSync(`${STATE}.tmp`, STATE)
}

/** A fresh copy: the present offset first, then every list; changes meanwhile come again from the stream. */
const copyAll = async () => {
  const { nextOffset } = await api("/api/v1/stream?after=now")
  const index = await api("/api/v1")
  const records = {}
  for (const { name } of index.resources) {
    let cursor
    do {
      const page = await api(`/api/v1/${name}?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`)
      for (const r of page.data) records[`${name}/${r.id}`] = r
      cursor = page.nextCursor
    } while (cursor)
  }
  const state = { offset: nextOffset, records }
  save(state)
  console.log(`copied ${Object.keys(records).length} records`)
  return state
}

let state = load() ?? (await copyAll())
for (;;) {
  try {
    const page = await api(
      `/api/v1/stream?limit=500${ONCE ? "" : "&wait=30"}&after=${encodeURIComponent(state.offset)}`
    )
    for (const item of page.data) {
      if (item.op === "delete") delete state.records[`${item.resource}/${item.id}`]
      else state.records[`${item.resource}/${item.id}`] = item.record
    }
    if (page.data.length > 0 || page.nextOffset !== state.offset) {
      state.offset = page.nextOffset
      save(state)
      if (page.data.length > 0) console.log(`applied ${page.data.length} changes`)
    }
    if (ONCE && page.data.length === 0) break
  } catch (e) {
    if (!(e instanceof MustRefetch)) throw e
    console.error(`the stream says to copy again: ${e.message}`)
    state = await copyAll()
  }
}
