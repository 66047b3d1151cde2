"""Understudy's benchmark suite: ``python -m bench [--quick]`` (or ``make bench``).

Each benchmark is a module with ``suite``, ``tables`` and ``targets`` (see ``_context.py``) and is
listed in ``__main__.BENCHMARKS``. Method, warm-up and sample size are in each module's docstring
and copied into the JSON results. None of them is a timed unit test: they print figures and
verdicts against the performance targets, and fail only when a benchmark cannot run.
"""
