"""The endpoints a declared comparison may test, one class each (:data:`suite.declared.ENDPOINTS`), looked up, never
named, by primary, coprimary, primary_text and plan: ``base.py`` (:class:`Answer`, :class:`Endpoint`), ``score.py``
(score, best_lr_score, interaction) and ``failure.py`` (frontier, frontier_slope)."""

from suite.analysis.endpoints.base import Answer, Endpoint, endpoint

__all__ = ["Answer", "Endpoint", "endpoint"]
