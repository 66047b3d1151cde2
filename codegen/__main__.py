"""`python -m codegen [--check]`: regenerate every derived file from the spec.

Writes, each only when its content changes:
- `backend/src/understudy/generated/` and `connector/src/understudy_connector/generated/`:
  Pydantic v2 models (datamodel-code-generator) and their base class;
- `packages/protocol/src/generated/` (`@understudy/protocol`, which the extension and the
  TypeScript connector import): TypeScript types (json-schema-to-typescript), the catalog, the
  problem codes and zod validators;
- the protocol constants (`backend/src/understudy/generated/protocol.py`,
  `packages/protocol/src/generated/protocol.ts`) and the frame decoder's field tables
  (`packages/protocol/src/generated/frames.ts`), see `codegen/_protocol.py`;
- `docs/reference/`: the API reference and the frames reference, self-contained HTML;
- from `spec/synthetic-users/`: `synthetic-users/src/synthetic_users/generated/` (its Pydantic
  models and catalog) and `docs/reference/synthetic-users-api.html`.

With `--check`, writes nothing and exits 1 listing every file that would change.
"""

from __future__ import annotations

import argparse
import sys

from codegen import _outputs
from codegen._bundle import SpecError, load, load_synthetic_users
from codegen._checks import check_meaning, check_synthetic_users_meaning


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codegen", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report drift, write nothing")
    args = parser.parse_args(argv)
    try:
        spec = load()
        check_meaning(spec)
        synthetic_users = load_synthetic_users()
        check_synthetic_users_meaning(synthetic_users)
    except SpecError as exc:
        print(f"codegen: spec rejected: {exc}", file=sys.stderr)
        return 2
    changed = _outputs.generate(spec, synthetic_users, write=not args.check)
    for path in changed:
        print(f"{'would change' if args.check else 'wrote'} {path}")
    if args.check and changed:
        print("codegen: generated files are stale; run `make codegen` and commit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
