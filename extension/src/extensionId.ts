/**
 * The fixed id of the Understudy extension, derived from the public `key` in manifest.json
 * (first 32 hex digits of SHA-256 over the DER key, each digit 0-f mapped to a-p). The backend
 * checks WebSocket `Origin: chrome-extension://<id>` against it. test/extensionId.test.ts
 * recomputes it from the manifest so the two cannot drift apart.
 */
export const EXTENSION_ID = "bpeobpapddlllpjoebimcillbkllkega";
