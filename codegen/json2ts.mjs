// Reads a bundled JSON Schema on stdin and prints TypeScript declarations with json-schema-to-typescript.
// Run from packages/protocol/ so the pinned generator in its node_modules is the one used.
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { resolve } from "node:path";

const require = createRequire(pathToFileURL(resolve(process.cwd(), "package.json")));
const { compile } = require("json-schema-to-typescript");

let input = "";
process.stdin.setEncoding("utf8");
for await (const chunk of process.stdin) input += chunk;
const schema = JSON.parse(input);
const ts = await compile(schema, schema.title, {
  bannerComment: "",
  additionalProperties: false,
  declareExternallyReferenced: true,
  enableConstEnums: false,
  strictIndexSignatures: true,
  unreachableDefinitions: true,
  // Bounded arrays stay arrays (not unions of tuples), so zod-validated values fit these types.
  maxItems: -1,
  format: true,
  style: { singleQuote: false, semi: true, printWidth: 100, trailingComma: "all" },
});
process.stdout.write(ts);
