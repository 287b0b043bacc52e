import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    // Many tests spawn the CLI or the service (each a Node start and a database connection);
    // on a busy 2-core machine a test of several spawns took 45-60 s. A budget, not a measure.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // Each file gets its own database; two cores, so a few files at once.
    maxWorkers: 3,
    pool: "forks"
  }
})
