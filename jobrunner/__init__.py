"""jobrunner: the program inside draftgen's pods (and on a laptop).

Subcommands: generate, report, merge, extract, simulate (the SGLang simulator).
"""
