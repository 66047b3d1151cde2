"""Code generation from the spec: Pydantic models, TypeScript types and integrator docs.

`python -m codegen` (or `make codegen`) regenerates everything; `--check` only reports drift.
"""
