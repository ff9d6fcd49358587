"""The analysis: a folder of finished runs -> comparison tables (md, tex, csv) and figures.

the runs come from :mod:`suite.results` and their groups from :mod:`suite.grouping` (below the analysis and the sweep); ``stats.py`` (pure
statistical functions, Bonferroni over a table's section), ``summary.py`` (per-group rates, intervals, tests), ``pooled.py``
(comparisons with few seeds: a pooled SD, intervals within a score's range, verdict words from 4
seeds), ``lr.py`` (each scheme at
its best learning rate, LR sensitivity, the stability frontier), ``doseresponse.py`` (the frontier as
a dose-response fit, and two schemes' frontiers as a ratio), ``depthslope.py`` and ``stability.py`` (one
model of every run's frontier across depth, a line per scheme, and the table of where and why runs broke), ``primary.py`` (the ablation's declared
comparison, tested alone; its words in ``primary_text.py``; each endpoint a class in ``endpoints/``), ``coprimary.py`` (several declared
comparisons, one Holm family), ``sequential.py`` (group-sequential looks at it), ``crossfit.py``
(best-rate comparisons cross-fitted over halves of the seeds), ``gamma.py`` (LayerScale's γ per block
over training), ``survival.py`` (time to learn: Kaplan-Meier, log-rank), ``transfer.py`` (does the best rate transfer across depth; ``lrpeak.py``:
where a validation curve peaks and the jackknife of that peak's slope over depth), ``regression.py`` and
``trends.py`` (trends with depth), ``robust.py`` (rliable-style aggregates across cells),
``propagation.py`` (``suite propagate`` runs), ``plan.py`` (seeds needed: ``suite plan``), ``assurance.py``
(the honest chance that a rerun decides a declared question), ``separation.py`` (which diagnostic separates
the runs that were not ok: an AUC per scheme), ``sensitivity.py`` (a declared frontier-slope verdict under other
definitions of not ok),
``markup.py`` and ``tables.py`` (Markdown / LaTeX / CSV tables; markup also turns Markdown into the
report's HTML and checks its links), ``products.py`` (the one registry of what an analysis writes:
tables, figures, findings sections), ``findings.py`` (``findings.md``, in
words), ``figures.py`` (matplotlib), ``report.py`` (one HTML page: ``suite report``), and
``analyze.py`` (the driver, :func:`suite.analysis.analyze.analyze`, and :func:`~suite.analysis.analyze.study`,
what it computes). Nothing here parses arguments
or prints: ``suite analyze`` (``suite/cli/analyze.py``) does.
"""
