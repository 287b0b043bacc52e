// npm run seed [-- --json]: loads the demo companies into the app tables, once.
import { parseArgs } from "node:util"
import { seedDemoOnce } from "../seed/demo.ts"
import { openDatabase } from "../seed/database.ts"

const USAGE = `Usage: npm run seed [-- --json]
Loads the demo companies (acme.localhost, globex.localhost) and their records into the app's
tables, unless acme.localhost is already there. Uses DATABASE_URL, else the embedded
PostgreSQL under DATA_DIR (default ./.data) on EMBEDDED_PG_PORT (default 54329).`

const options = (() => {
  try {
    return parseArgs({ options: { json: { type: "boolean" }, help: { type: "boolean", short: "h" } }, strict: true }).values
  } catch (e) {
    process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n${USAGE}\n`)
    process.exit(2)
  }
})()
if (options.help) {
  process.stdout.write(USAGE + "\n")
  process.exit(0)
}

const main = async () => {
  const db = await openDatabase()
  try {
    const result = await seedDemoOnce(db.sql)
    if (options.json) {
      process.stdout.write(JSON.stringify(result.seeded ? { seeded: true, ...result.summary } : result) + "\n")
    } else if (!result.seeded) {
      process.stdout.write(`Demo data already present (company ${result.host} exists); nothing changed.\n`)
    } else {
      const s = result.summary
      const total = Object.values(s.counts).reduce((a, b) => a + b, 0)
      const names = s.companies.map((c) => `"${c.name}" (${c.host}, ${c.tier} tier)`).join(" and ")
      const counts = Object.entries(s.counts)
        .map(([table, n]) => `${n} ${table.replaceAll("_", " ")}`)
        .join(", ")
      process.stdout.write(`Seeded ${names} in ${s.elapsedMs} ms: ${total} rows (${counts}).\n`)
    }
  } finally {
    await db.close()
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`Seeding failed: ${e instanceof Error ? e.message : String(e)}\n`)
  process.exitCode = 1
})
