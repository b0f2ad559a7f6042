"""Benchmarks run by ``gtvcvx bench TARGET``.

Each public module here is a target with ``NAME``, ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int``; targets are discovered automatically. Shared machinery (isolated runs
with peak-memory measurement, report writing) lives in :mod:`gtvcvx.bench.harness`.
"""
