"""Language-model studies: small LMs trained with one budget and scored on held-out text (CAT's
length extrapolation, Zoology's AR-hit gap, ICLL's n-gram heads, LaS on text8 / enwik8)."""
