"""Functional building blocks shared by several mixers (pure PyTorch reference versions)."""
