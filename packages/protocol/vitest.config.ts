import { defineConfig } from "vitest/config";

// Workspace packages are read from their TypeScript source (the "understudy-source" export
// condition), then Vite's default server conditions.
const conditions = ["understudy-source", "module", "node", "development|production"];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: { include: ["test/**/*.test.ts"], environment: "node" },
});
