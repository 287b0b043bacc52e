import { describe, expect, it } from "vitest"
import { forbiddenInName } from "../../src/domain/names.ts"
import { checkName } from "../../src/access/keys/store.ts"
import { parseName } from "../../src/webhooks/endpoints/validate.ts"
import { cliMessage } from "../../src/faces/cli/errors.ts"
import { httpMessage } from "../../src/faces/http/errors.ts"

describe("names", () => {
  it.each([
    ["line1\nline2", "U+000A"],
    ["tab\there", "U+0009"],
    ["esc\u001b[31mRED", "U+001B"],
    ["nul\u0000", "U+0000"],
    ["del\u007f", "U+007F"],
    ["c1\u0085", "U+0085"],
    ["evil\u202Etxt.exe", "U+202E"],
    ["isolate\u2066x\u2069", "U+2066"]
  ])("refuses %j (%s)", (name, found) => {
    expect(forbiddenInName(name)).toBe(found)
    const problem = checkName(name)!
    expect(cliMessage(problem)).toBe(
      `--name may not contain control characters (such as a newline, a tab or an escape) or bidirectional overrides (found ${found})`
    )
    expect(httpMessage(problem)).toBe(
      `name may not contain control characters (such as a newline, a tab or an escape) or bidirectional overrides (found ${found})`
    )
    expect(() => parseName(name)).toThrow(`(found ${found})`)
  })

  it.each(["Power BI", "Zapier → Slack", "日本語の名前", "שם בעברית", "émoji 🚧 ok", "a-b_c.d (e) [f]"])(
    "takes %j",
    (name) => {
      expect(forbiddenInName(name)).toBeUndefined()
      expect(checkName(name)).toBeUndefined()
      expect(parseName(name)).toBe(name)
    }
  )
})
