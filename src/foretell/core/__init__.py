"""Model-free core: proposers (prediction aligner, n-gram lookup), adaptive k, verification."""
