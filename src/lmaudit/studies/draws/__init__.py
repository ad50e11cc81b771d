"""The ``draws`` study (seed 004): persistence of sampled answers from one draw to the next."""
