import { defaultClientConditions, defaultServerConditions } from "vite";
import { defineConfig } from "vitest/config";

export default defineConfig({
  // @understudy/protocol is read from its TypeScript source (see its package.json exports).
  resolve: { conditions: ["understudy-source", ...defaultClientConditions] },
  ssr: { resolve: { conditions: ["understudy-source", ...defaultServerConditions] } },
  test: {
    include: ["test/**/*.test.ts"],
    environment: "node",
    restoreMocks: true,
  },
});
