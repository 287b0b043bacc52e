// keys create | list | revoke | portal-link: API keys of a company (docs/api.md#keys).
import { Console, Effect, Option } from "effect"
import { Command, Flag } from "effect/cli"
import { RESOURCES } from "../../../domain/resources.ts"
import { notFound } from "../../../domain/errors.ts"
import { adminOfOwner, companyById, findCompany } from "../../../access/identity.ts"
import {
  companyKeysRefusal,
  createKey,
  DEFAULT_EXPIRY,
  EXPIRY_CHOICES,
  keyCompany,
  listKeys,
  MAX_ACTIVE_KEYS,
  parseScopes,
  revokeKey
} from "../../../access/keys/store.ts"
import { createPortalLink } from "../../../access/portal.ts"
import {
  asAdminFlags,
  asOptional,
  asRequired,
  company,
  companyAndAdmin,
  databaseCommand,
  idArgument,
  json,
  listing,
  optionalAdmin,
  optionalText,
  output,
  when
} from "../support.ts"

const create = databaseCommand(
  "create",
  {
    company,
    name: Flag.String("name").pipe(Flag.withDescription("After what will use the key")),
    read: Flag.String("read").pipe(
      Flag.withDescription(`Resources it may read, separated by commas, or all (${RESOURCES.join(", ")})`)
    ),
    webhooks: Flag.Boolean("webhooks").pipe(
      Flag.withDescription("May subscribe itself to events (POST /api/v1/hooks)"),
      Flag.withDefault(false)
    ),
    expires: Flag.Literals("expires", EXPIRY_CHOICES).pipe(
      Flag.withDescription(`When it stops working (default ${DEFAULT_EXPIRY})`),
      Flag.withDefault(DEFAULT_EXPIRY)
    ),
    as: asRequired,
    json
  },
  (args) =>
    Effect.gen(function* () {
      const scopes = parseScopes(args.read)
      if ("error" in scopes) return yield* scopes.error
      const { company, actor } = yield* companyAndAdmin(args.company, args.as)
      const key = yield* createKey(actor, {
        companyId: company.id,
        name: args.name,
        scopes: scopes.scopes,
        webhooks: args.webhooks,
        expires: args.expires
      })
      yield* output(args.json, { id: key.id, key: key.key }, () =>
        [
          `Created API key "${key.name}" (${key.id}) for ${company.name} (${company.host}).`,
          `  reads:    ${key.scopes.length === RESOURCES.length ? "all" : key.scopes.join(", ")}`,
          `  webhooks: ${key.webhooks ? "yes" : "no"}`,
          `  expires:  ${when(key.expiresAt, "never")}`,
          "",
          "The key is shown this once; store it now:",
          "",
          `  ${key.key}`,
          ""
        ].join("\n")
      )
      // Made all the same (an admin may make keys before the company moves up), but said.
      const refusal = yield* companyKeysRefusal(company.id)
      if (refusal?._tag === "Tier") {
        yield* Console.error(
          `warning: ${company.name} is on the ${refusal.tier} tier: the API answers this key 403 until the company is on the Company tier.`
        )
      } else if (refusal?._tag === "ApiOff") {
        yield* Console.error(
          `warning: the API is turned off for ${company.name}: it answers this key 403 until the API is turned on.`
        )
      }
    })
).pipe(
  Command.withDescription(`Create an API key (shown once). A company holds at most ${MAX_ACTIVE_KEYS} active keys.`),
  Command.withExamples([
    {
      command:
        "keys create --company acme.localhost --name 'Power BI' --read incidents,corrective-actions --as admin@acme.example",
      description: "A key that reads two resources"
    },
    {
      command:
        "keys create --company acme.localhost --name Zapier --read all --webhooks --expires 1y --as admin@acme.example --json",
      description: 'Prints {"id": ..., "key": "mk_..."}'
    }
  ])
)

const list = databaseCommand("list", { company, as: asOptional, json }, (args) =>
  Effect.gen(function* () {
    const { company } = yield* optionalAdmin(args.company, args.as)
    const keys = yield* listKeys(company.id)
    yield* output(args.json, keys, () =>
      listing(
        keys,
        {
          empty: `${company.name} (${company.host}) has no API keys.`,
          title: `API keys of ${company.name} (${company.host}): ${keys.filter((k) => k.state === "active").length} active of at most ${MAX_ACTIVE_KEYS}`
        },
        ["ID", "NAME", "READS", "WEBHOOKS", "MADE BY", "CREATED", "EXPIRES", "LAST USED", "REQUESTS", "STATE"],
        () =>
          keys.map((k) => [
            k.id,
            k.name,
            k.scopes.length === RESOURCES.length ? "all" : k.scopes.join(","),
            k.webhooks ? "yes" : "no",
            k.createdBy ?? "-",
            when(k.createdAt),
            when(k.expiresAt, "never"),
            when(k.lastUsedAt, "never"),
            String(k.requestCount),
            k.state
          ])
      )
    )
  })
).pipe(
  Command.withDescription(
    "List a company's API keys: who made each, scopes, created, expiry, last use, request count, state"
  )
)

const revoke = databaseCommand(
  "revoke",
  {
    id: idArgument("The key's id (see keys list)"),
    ...asAdminFlags
  },
  (args) =>
    Effect.gen(function* () {
      const companyId = yield* keyCompany(args.id)
      const owner = yield* companyById(companyId)
      if (args.company._tag === "Some") {
        const named = yield* findCompany(args.company.value)
        if (named.id !== owner.id)
          return yield* notFound(`no API key with id ${args.id} in ${named.name} (${named.host})`)
      }
      const actor = yield* adminOfOwner(args.as, owner, `no API key with id ${args.id}`)
      const key = yield* revokeKey(actor, args.id)
      yield* output(
        args.json,
        key,
        () =>
          `Revoked API key "${key.name}" (${key.id}). Its next request gets 401; its webhook subscriptions are deleted.`
      )
    })
).pipe(
  Command.withDescription("Revoke an API key: its next request gets 401 and its webhook subscriptions are deleted")
)

const portalLink = databaseCommand(
  "portal-link",
  {
    id: idArgument("The key's id (see keys list)"),
    expires: Flag.String("expires").pipe(
      Flag.withDescription("How long the link lasts: e.g. 15m, 1h, 24h (at most 24h)"),
      Flag.withDefault("1h")
    ),
    baseUrl: Flag.String("base-url").pipe(
      Flag.withDescription("The service's address as the integrator's browser reaches it"),
      Flag.withDefault(`http://127.0.0.1:${process.env.PORT ?? "3000"}`)
    ),
    brandName: optionalText("brand-name", "The name the portal shows instead of the company's"),
    brandColour: optionalText("brand-colour", "The portal's colour, #rrggbb"),
    ...asAdminFlags
  },
  (args) =>
    Effect.gen(function* () {
      const companyId = yield* keyCompany(args.id)
      const owner = yield* companyById(companyId)
      if (args.company._tag === "Some") {
        const named = yield* findCompany(args.company.value)
        if (named.id !== owner.id)
          return yield* notFound(`no API key with id ${args.id} in ${named.name} (${named.host})`)
      }
      const actor = yield* adminOfOwner(args.as, owner, `no API key with id ${args.id}`)
      const link = yield* createPortalLink(actor, args.id, {
        expiresIn: args.expires,
        branding: {
          name: Option.getOrUndefined(args.brandName),
          colour: Option.getOrUndefined(args.brandColour)
        }
      })
      const url = `${args.baseUrl.replace(/\/+$/, "")}${link.path}`
      yield* output(args.json, { ...link, url }, () =>
        [
          `Portal link for API key "${link.keyName}" (${link.keyId}), until ${when(link.expiresAt)}:`,
          "",
          `  ${url}`,
          "",
          "It works once (a session in the browser that opens it), and ends when it expires or the key is revoked.",
          "It is shown this once: only a hash of it is kept.",
          ""
        ].join("\n")
      )
    })
).pipe(
  Command.withDescription(
    "A one-time link to a page of one key's subscriptions and deliveries, for its integrator (at most 24 hours)"
  ),
  Command.withExamples([
    {
      command: "keys portal-link 6f1c… --expires 4h --as admin@acme.example",
      description: "Prints the link (/portal/<token>) to send the integrator"
    }
  ])
)

export const keys = Command.make("keys").pipe(
  Command.withDescription("API keys: create, list, revoke, portal-link"),
  Command.withSubcommands([create, list, revoke, portalLink])
)
