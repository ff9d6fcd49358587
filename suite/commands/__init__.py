"""Thin CLI front-ends; the work lives in the modules they call."""
