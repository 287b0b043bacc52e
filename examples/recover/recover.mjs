// After your receiver was down: what did not arrive, and having it sent again. Plain Node (18+),
// no dependencies, for subscriptions made with POST /api/v1/hooks (docs/integrators.md).
//
//   API_URL=https://acme.example.com API_KEY=mk_... node recover.mjs --since 2026-03-04T00:00:00Z [--subscription <id>] [--dry-run]
//
// For each of the key's subscriptions (or the one named):
// 1. lists the deliveries that failed since then, with the last attempt of each (the status your
//    receiver answered, or why there was none) and the start of its answer;
// 2. unless --dry-run, asks for a recovery: everything that failed or never went since then is
//    sent again, each under its own webhook-id (your duplicate check passes each once);
// 3. follows the recovery until it has finished.
const API_URL = (process.env.API_URL ?? "").replace(/\/+$/, "")
const API_KEY = process.env.API_KEY ?? ""
const args = process.argv.slice(2)
const option = (name) => {
  const i = args.indexOf(name)
  return i >= 0 ? args[i + 1] : undefined
}
const since = option("--since")
const only = option("--subscription")
const dryRun = args.includes("--dry-run")
if (!API_URL || !API_KEY.startsWith("mk_") || !since) {
  console.error(
    "Usage: API_URL=https://... API_KEY=mk_... node recover.mjs --since <date> [--subscription <id>] [--dry-run]"
  )
  process.exit(2)
}

const api = async (method, path, body) => {
  for (;;) {
    const res = await fetch(`${API_URL}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${API_KEY}`,
        accept: "application/json",
        ...(body === undefined ? {} : { "content-type": "application/json" })
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    const answer = await res.json()
    // The key's rate limit (120 requests a minute): wait as told, then go on.
    if (res.status === 429) {
      await new Promise((r) => setTimeout(r, Number(res.headers.get("retry-after") ?? 1) * 1000))
      continue
    }
    if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${answer.error}`)
    return answer
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

const { data: subscriptions } = await api("GET", "/api/v1/hooks")
for (const sub of subscriptions.filter((s) => only === undefined || s.id === only)) {
  console.log(`subscription ${sub.id} ${sub.event} -> ${sub.url}`)
  let cursor = null
  let failed = 0
  do {
    const query = new URLSearchParams({ status: "failed", createdAfter: since, limit: "100" })
    if (cursor) query.set("cursor", cursor)
    const page = await api("GET", `/api/v1/hooks/${sub.id}/deliveries?${query}`)
    for (const d of page.data) {
      failed++
      const last = d.attempts.at(-1)
      const why = last ? (last.status !== null ? `HTTP ${last.status}` : last.errorKind) : "never attempted"
      const one = await api("GET", `/api/v1/hooks/${sub.id}/deliveries/${d.id}`)
      const answer = one.attempts.at(-1)?.response
      console.log(`  failed ${d.id} ${d.event} event ${d.eventId}: ${why}${answer ? ` "${answer}"` : ""}`)
    }
    cursor = page.nextCursor
  } while (cursor)
  console.log(`  ${failed} failed since ${since}`)
  if (dryRun) continue
  let job = await api("POST", `/api/v1/hooks/${sub.id}/recover`, { since })
  console.log(
    `  recovery ${job.id ?? "(nothing to send)"}: ${job.queued} to send, ${job.skippedDelivered} delivered already`
  )
  while (job.id !== null && job.state === "running") {
    await sleep(1_000)
    job = await api("GET", `/api/v1/replays/${job.id}`)
    console.log(
      `  ${job.progress.sent} sent, ${job.progress.remaining} to go${job.waiting ? ` (waiting: ${job.waiting})` : ""}`
    )
  }
  console.log(`  recovery ${job.state}: ${job.progress.sent} sent`)
}
