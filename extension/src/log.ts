/**
 * Content-free logging. Log lines carry an event name and small scalar fields; callers never pass
 * URLs, titles, page content, refs, tickets or credentials. As a second line of defence the logger
 * replaces any registered secret (the device credential, live tickets) with `[redacted]`.
 */

export type LogFields = Readonly<Record<string, string | number | boolean | undefined>>;

export interface Logger {
  info(event: string, fields?: LogFields): void;
  warn(event: string, fields?: LogFields): void;
}

/** Where formatted lines go; the console in the extension, an array in tests. */
export type LogSink = (level: "info" | "warn", line: string) => void;

const REDACTED = "[redacted]";
const MIN_SECRET_LENGTH = 6;

/** A logger that formats `event key=value …` and scrubs registered secrets. */
export class RedactingLogger implements Logger {
  private readonly secrets = new Set<string>();

  constructor(private readonly sink: LogSink) {}

  /** Registers a value that must never appear in a log line. */
  addSecret(secret: string): void {
    if (secret.length >= MIN_SECRET_LENGTH) this.secrets.add(secret);
  }

  removeSecret(secret: string): void {
    this.secrets.delete(secret);
  }

  info(event: string, fields?: LogFields): void {
    this.sink("info", this.format(event, fields));
  }

  warn(event: string, fields?: LogFields): void {
    this.sink("warn", this.format(event, fields));
  }

  private format(event: string, fields?: LogFields): string {
    let line = event;
    for (const [key, value] of Object.entries(fields ?? {})) {
      if (value !== undefined) line += ` ${key}=${String(value)}`;
    }
    for (const secret of this.secrets) line = line.split(secret).join(REDACTED);
    return `understudy: ${line}`;
  }
}

/** The logger of the real service worker. */
export function consoleSink(level: "info" | "warn", line: string): void {
  if (level === "warn") console.warn(line);
  else console.info(line);
}
