"""Sub-commands of the ``gtvcvx`` command line; each module defines ``NAME``, ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int`` and is discovered automatically."""
