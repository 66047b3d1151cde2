import { defineConfig } from "vitest/config";

// Workspace packages are read from their TypeScript source (the "understudy-source" export
// condition), then Vite's default server conditions.
const conditions = ["understudy-source", "module", "node", "development|production"];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    environment: "node",
    projects: [
      { extends: true, test: { name: "unit", include: ["test/unit/**/*.test.ts"] } },
      {
        extends: true,
        test: {
          name: "integration",
          include: ["test/integration/**/*.test.ts"],
          // One backend + simulated device stack (tests/connector/integration/ts_stack.py),
          // started once and reset before each test.
          globalSetup: ["test/integration/globalSetup.ts"],
          fileParallelism: false,
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        extends: true,
        // Run by tests/e2e/test_typescript_connector.py against real Chromium.
        test: { name: "browser", include: ["test/browser/**/*.test.ts"], testTimeout: 120_000 },
      },
    ],
  },
});
