"""The choir report: the HTML page (:mod:`.page`), its figures, its answer and its tables."""
