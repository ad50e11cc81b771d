"""The QQ report: the HTML page (:mod:`.page`), its figures, its answer and what was asked."""
