import { describe, expect, it } from "vitest"
import { parseLogLevel } from "../../src/platform/logging.ts"

describe("LOG_LEVEL", () => {
  it("takes the level names in any case, warn and warning alike", () => {
    expect(["Debug", "info", "WARN", "Warning", "error"].map(parseLogLevel)).toEqual([
      "Debug",
      "Info",
      "Warn",
      "Warn",
      "Error"
    ])
  })
  it("refuses what is not a level", () => {
    expect(parseLogLevel("loud")).toBeUndefined()
    expect(parseLogLevel("")).toBeUndefined()
  })
})
