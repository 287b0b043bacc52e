import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Each file gets its own database; two cores, so a few files at once.
    maxWorkers: 3,
    pool: "forks"
  }
})
