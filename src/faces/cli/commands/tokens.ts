// tokens create | list | revoke: admin tokens for the admin HTTP API (/admin/v1).
import { Effect, Option } from "effect"
import { Command, Flag } from "effect/cli"
import { at, invalid, words } from "../../../domain/errors.ts"
import { adminOfOwner, companyById, findAdmin, findCompany } from "../../../access/identity.ts"
import { EXPIRY_CHOICES } from "../../../access/keys/store.ts"
import { createToken, DEFAULT_TOKEN_EXPIRY, listTokens, revokeToken, tokenCompany } from "../../../access/tokens.ts"
import {
  asOptional,
  asRequired,
  companyOptional,
  databaseCommand,
  idArgument,
  json,
  output,
  table,
  when
} from "../support.ts"

const create = databaseCommand(
  "create",
  {
    as: asRequired,
    company: companyOptional,
    name: Flag.String("name").pipe(Flag.withDescription("What the token is for"), Flag.withDefault("admin token")),
    expires: Flag.Literals("expires", EXPIRY_CHOICES).pipe(
      Flag.withDescription(`When it stops working (default ${DEFAULT_TOKEN_EXPIRY})`),
      Flag.withDefault(DEFAULT_TOKEN_EXPIRY)
    ),
    json
  },
  (args) =>
    Effect.gen(function* () {
      const company = Option.isSome(args.company) ? yield* findCompany(args.company.value) : undefined
      const actor = yield* findAdmin(args.as, company)
      const token = yield* createToken(actor, { name: args.name, expires: args.expires })
      yield* output(args.json, { id: token.id, token: token.token }, () =>
        [
          `Created admin token "${token.name}" (${token.id}) for ${token.userEmail}; expires ${when(token.expiresAt, "never")}.`,
          "Use it as Authorization: Bearer <token> on /admin/v1. It is shown this once; store it now:",
          "",
          `  ${token.token}`,
          ""
        ].join("\n")
      )
    })
).pipe(Command.withDescription("Issue an admin token for the admin HTTP API, acting as the admin named by --as"))

const list = databaseCommand("list", { company: companyOptional, as: asOptional, json }, (args) =>
  Effect.gen(function* () {
    const company = yield* Effect.gen(function* () {
      if (Option.isSome(args.company)) {
        const company = yield* findCompany(args.company.value)
        if (Option.isSome(args.as)) yield* findAdmin(args.as.value, company)
        return company
      }
      if (Option.isNone(args.as))
        return yield* invalid(words`name the company with ${at("company")} (or yourself with ${at("admin")})`)
      const actor = yield* findAdmin(args.as.value)
      return yield* companyById(actor.companyId)
    })
    const tokens = yield* listTokens(company.id)
    yield* output(args.json, tokens, () =>
      tokens.length === 0
        ? `${company.name} (${company.host}) has no admin tokens.`
        : table(
            ["ID", "NAME", "TOKEN", "ADMIN", "CREATED", "EXPIRES", "LAST USED", "STATE"],
            tokens.map((t) => [
              t.id,
              t.name,
              `${t.prefix}...`,
              t.userEmail,
              when(t.createdAt),
              when(t.expiresAt, "never"),
              when(t.lastUsedAt, "never"),
              t.state
            ])
          )
    )
  })
).pipe(Command.withDescription("List a company's admin tokens"))

const revoke = databaseCommand(
  "revoke",
  {
    id: idArgument("The token's id (see tokens list)"),
    as: asRequired,
    json
  },
  (args) =>
    Effect.gen(function* () {
      const companyId = yield* tokenCompany(args.id)
      const actor = yield* adminOfOwner(args.as, yield* companyById(companyId), `no admin token with id ${args.id}`)
      const token = yield* revokeToken(actor, args.id)
      yield* output(args.json, token, () => `Revoked admin token "${token.name}" (${token.id}).`)
    })
).pipe(Command.withDescription("Revoke an admin token"))

export const tokens = Command.make("tokens").pipe(
  Command.withDescription("Admin tokens for the admin HTTP API: create, list, revoke"),
  Command.withSubcommands([create, list, revoke])
)
