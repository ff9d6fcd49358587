"""The analysis: a folder of finished runs -> comparison tables (md, tex, csv) and figures.

Runs come from :mod:`suite.results`, their groups from :mod:`suite.grouping`. ``stats.py`` (pure statistical
functions), ``summary.py`` (per-group rates, intervals, tests), ``pooled.py`` (comparisons with few seeds),
``lr.py`` (each scheme at its best learning rate, LR sensitivity, stability frontier), ``doseresponse.py`` (the
frontier as a dose-response fit; two schemes' frontiers as a ratio), ``depthslope.py`` and ``stability.py`` (one
model of every run's frontier across depth; where and why runs broke), ``primary.py`` (the declared comparison,
tested alone; words in ``primary_text.py``; each endpoint a class in ``endpoints/``), ``coprimary.py`` (several
declared comparisons, one Holm family), ``sequential.py`` (group-sequential looks), ``crossfit.py`` (best-rate
comparisons cross-fitted over halves of the seeds), ``gamma.py`` (LayerScale's γ per block), ``survival.py``
(time to learn), ``transfer.py`` and ``lrpeak.py`` (does the best rate transfer across depth), ``regression.py``
and ``trends.py`` (trends with depth), ``robust.py`` (rliable-style aggregates), ``propagation.py`` (``suite
propagate`` runs), ``plan.py`` (seeds needed: ``suite plan``), ``assurance.py`` (the chance a rerun decides a
declared question), ``separation.py`` (which diagnostic separates the runs not ok), ``sensitivity.py`` (a
frontier-slope verdict under other definitions of not ok), ``markup.py`` and ``tables.py`` (Markdown / LaTeX /
CSV tables, Markdown to HTML), ``products.py`` (the registry of what an analysis writes), ``findings.py``
(``findings.md``), ``figures.py`` (matplotlib), ``report.py`` (one HTML page: ``suite report``) and
``analyze.py`` (the driver). Nothing here parses arguments or prints: ``suite/cli/analyze.py`` does.
"""
