// database setup-sql: prints the SQL a DBA runs so the service runs as a least-privilege
// role beside the app's tables, in two parts (the app's database, the service's own).
// Connects nowhere: a DBA can read it before anything runs.
import { Effect } from "effect"
import { Command, Flag } from "effect/cli"
import { optionalText } from "../support.ts"
import { CaptureConfig } from "../../../platform/config.ts"
import { badRoleName, SETUP_PARTS, setupSql } from "../../../pipeline/capture/setup-sql.ts"
import { at, invalid, words } from "../../../domain/errors.ts"

const setupSqlCommand = Command.make(
  "setup-sql",
  {
    role: Flag.String("role").pipe(
      Flag.withDescription("The login role the service will run as (made by the DBA; see the comments printed)")
    ),
    publication: optionalText(
      "publication",
      "The publication to create (default: PUBLICATION, else safety_records_service)"
    ),
    part: Flag.Literals("part", SETUP_PARTS).pipe(
      Flag.withDescription(
        "app: what runs in the app's database; service: what runs in the service's own database (SERVICE_DATABASE_URL); both (default): the two, one after the other"
      ),
      Flag.withDefault("both" as const)
    )
  },
  (args) =>
    Effect.gen(function* () {
      const bad = badRoleName(args.role)
      if (bad !== null) return yield* Effect.fail(invalid(words`${at("role")}: ${bad}`))
      const publication = args.publication._tag === "Some" ? args.publication.value : (yield* CaptureConfig).publication
      if (!/^[a-z_][a-z0-9_]*$/.test(publication)) {
        return yield* Effect.fail(
          invalid(`the publication name must be a plain lower-case identifier, not "${publication}"`)
        )
      }
      process.stdout.write(setupSql({ role: args.role, publication, part: args.part }))
    })
).pipe(
  Command.withDescription(
    "Print the SQL a DBA runs once so the service can run as a least-privilege role (connects nowhere)"
  )
)

export const database = Command.make("database").pipe(
  Command.withDescription("The service's database: what a DBA sets up for it"),
  Command.withSubcommands([setupSqlCommand])
)
