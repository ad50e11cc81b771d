"""The draws report: the HTML page (:mod:`.page`) and its figures."""
