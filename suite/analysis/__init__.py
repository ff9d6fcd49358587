"""The analysis: a folder of finished runs -> comparison tables (md, tex, csv), figures and ``findings.md``.

``analyze.py`` drives it; ``products.py`` registers what it writes. Rates and tests: ``stats.py``, ``summary.py``,
``pooled.py``. Learning rates: ``lr.py``, ``crossfit.py``, ``transfer.py``, ``lrpeak.py``. The stability frontier:
``doseresponse.py``, ``depthslope.py``, ``stability.py``, ``separation.py``, ``sensitivity.py``. The declared
comparisons: ``primary.py``, ``primary_text.py``, ``endpoints/``, ``coprimary.py``; seeds for them: ``plan.py``,
``assurance.py``. Other measures: ``gamma.py`` (γ per block), ``survival.py`` (time to learn), ``regression.py``,
``trends.py``, ``robust.py``, ``propagation.py`` (``suite propagate``). Outputs: ``markup.py``, ``tables.py``,
``findings.py``, ``figures.py``, ``report.py`` (``suite report``). Nothing here parses arguments or prints.
"""
