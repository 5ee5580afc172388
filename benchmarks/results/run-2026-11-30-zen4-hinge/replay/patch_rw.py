import os
if os.environ.get("NOREWRITE"):
    import dataclasses
    from foretell.core import aligner as _al
    _orig = _al.PredictionAligner.__init__
    def _init(self, prediction, search_length=None, config=None, newline_ids=None):
        config = dataclasses.replace(config or _al.AlignerConfig(), learn_rewrites=False)
        _orig(self, prediction, search_length, config, newline_ids)
    _al.PredictionAligner.__init__ = _init
if os.environ.get("NOPUNCT"):
    from foretell.core import aligner as _al
    import json as _json
    SYMBOL = set(_json.load(open(os.environ["NOPUNCT"])))
    _count = _al._Rewrites.count
    def _c(self, old, new):
        if new is not None and all(t in SYMBOL for t in old) and all(t in SYMBOL for t in new) and old not in self._seen:
            return
        _count(self, old, new)
    _al._Rewrites.count = _c
