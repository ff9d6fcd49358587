"""The analysis: a folder of finished runs -> comparison tables (md, tex, csv) and figures.

``load.py`` (summaries and curves back from a results folder), ``grouping.py`` (which runs form a
group, table sections), ``stats.py`` (pure statistical functions), ``summary.py`` (per-group rates,
intervals, tests), ``tables.py`` (paper-style Markdown / LaTeX), ``figures.py`` (matplotlib), and
``analyze.py`` (the driver, :func:`suite.analysis.analyze.analyze`). Nothing here parses arguments
or prints: ``suite analyze`` (``suite/cli/analyze.py``) does.
"""
