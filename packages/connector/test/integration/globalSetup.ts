/**
 * Starts tests/connector/integration/ts_stack.py (the backend and simulated devices the Python
 * integration tests use, remote-controlled) once for the integration project, and hands its
 * control URL to the tests. The stack stops itself when its standard input closes.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    control: string;
  }
}

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..");
const STARTUP_MS = 60_000;

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const python = process.env.UNDERSTUDY_PYTHON ?? join(ROOT, ".venv", "bin", "python");
  if (!existsSync(python)) throw new Error(`${python} is missing: run scripts/bootstrap`);
  const started = spawn(python, ["-m", "tests.connector.integration.ts_stack"], {
    cwd: ROOT,
    stdio: ["pipe", "pipe", "inherit"],
    env: { ...process.env, PYTHONUNBUFFERED: "1" },
  });
  const control = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("ts_stack did not start in time")), STARTUP_MS);
    started.once("exit", (code) => reject(new Error(`ts_stack exited with ${code}`)));
    const lines = createInterface({ input: started.stdout });
    lines.once("line", (line) => {
      clearTimeout(timer);
      resolve((JSON.parse(line) as { control: string }).control);
    });
  });
  project.provide("control", control);
  return async () => {
    const exited = new Promise((resolve) => started.once("exit", resolve));
    started.stdin?.end();
    await exited;
  };
}
