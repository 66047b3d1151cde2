// Bundles the extension into dist/, which Chromium loads unpacked (--load-extension=dist) and
// `make extension` zips for the Chrome Web Store.
import { copyFile, mkdir, readdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { build } from "esbuild";

const root = dirname(fileURLToPath(import.meta.url));
const outdir = join(root, "dist");

await rm(outdir, { recursive: true, force: true });
await mkdir(outdir, { recursive: true });

await build({
  entryPoints: {
    background: join(root, "src", "background.ts"),
    options: join(root, "src", "ui", "options.ts"),
    popup: join(root, "src", "ui", "popup.ts"),
  },
  outdir,
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "chrome125",
  sourcemap: "linked",
  // @understudy/protocol is bundled from its TypeScript source (see its package.json exports).
  conditions: ["understudy-source"],
  logLevel: "warning",
});

for (const file of await readdir(join(root, "static"))) {
  await copyFile(join(root, "static", file), join(outdir, file));
}
await copyFile(join(root, "manifest.json"), join(outdir, "manifest.json"));
await copyFile(join(root, "managed_schema.json"), join(outdir, "managed_schema.json"));
console.log(`built ${outdir}`);
