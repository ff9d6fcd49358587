"""The endpoints a declared comparison may test, one class each, registered in :data:`suite.declared.ENDPOINTS`
(what each asks of the grid: :data:`suite.declared.RULES`). A class evaluates the comparison on the runs,
says its answer in words, fills the verdict table's cells and the plan's row, and plans the seeds that
would decide it; :mod:`suite.analysis.primary`, :mod:`~suite.analysis.primary_text`,
:mod:`~suite.analysis.coprimary` and :mod:`~suite.analysis.plan` call it, never naming an endpoint.

``base.py`` (the :class:`Answer`, the :class:`Endpoint` a class implements), ``score.py`` (score,
best_lr_score, interaction) and ``failure.py`` (not_ok_rate, frontier, frontier_slope).
"""

from suite.analysis.endpoints.base import Answer, Endpoint, endpoint

__all__ = ["Answer", "Endpoint", "endpoint"]
