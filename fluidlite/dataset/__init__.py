"""Fluid 1.x ``paddle.dataset``: public data sets as readers (see docs/data.md)."""
