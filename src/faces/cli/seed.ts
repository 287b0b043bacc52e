// npm run seed [-- --schema-only] [-- --json]: makes the demo's app tables where there are
// none, then loads the demo companies into them, once. The service's schema is not touched.
import { parseArgs } from "node:util"
import { ensureDemoAppSchema } from "../../platform/db/demo-schema.ts"
import { seedDemoOnce } from "../../seed/demo.ts"
import { openDatabase } from "../../seed/database.ts"

const USAGE = `Usage: npm run seed [-- --schema-only] [-- --json]
Makes the demo's copy of the app's tables (schema app, sql/demo/app.sql) where the database has
no schema app, then loads the demo companies (acme.localhost, globex.localhost) and their
records, unless acme.localhost is already there. With --schema-only: the app's tables alone,
no demo rows. Never touches the service's own schema. Uses DATABASE_URL, else the embedded
PostgreSQL under DATA_DIR (default ./.data) on EMBEDDED_PG_PORT (default 54329).`

const options = (() => {
  try {
    return parseArgs({ options: { json: { type: "boolean" }, "schema-only": { type: "boolean" }, help: { type: "boolean", short: "h" } }, strict: true }).values
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
    const created = await ensureDemoAppSchema(db.sql)
    if (options["schema-only"]) {
      const message = created ? "Made the demo's app tables (schema app); no rows." : "Schema app is already there; nothing changed."
      process.stdout.write(options.json ? JSON.stringify({ schemaCreated: created }) + "\n" : message + "\n")
      return
    }
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
