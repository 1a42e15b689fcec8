"""Language-model studies: small LMs trained with one budget and scored on held-out text (CAT's
length extrapolation and Table 2 orderings, Zoology's AR-hit gap and Table 2 hybrids, ICLL's n-gram
heads, LaS on text8 / enwik8 and its WikiText-103 ablations)."""
