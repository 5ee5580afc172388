"""foretell: Predicted Outputs and speculative decoding that skip what the model already knows.

Notation used throughout (as in the papers): p = the target model's distribution, q = the draft's.
"""

__version__ = "0.1.0"
