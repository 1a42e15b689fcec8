"""MAD noisy in-context recall (Poli et al. 2024, arXiv 2403.17844; MAD-lab
``generate_noisy_in_context_recall_instance``, ``configs/tasks/noisy-in-context-recall.yml``).

In-context recall (``mad_in_context_recall``, whose docstring gives the layout) with pair
slots replaced, each with probability ``frac_noise``, by two tokens of a separate noise
vocabulary: the model must ignore them. MAD's baseline takes 16 of the 32 ids for noise and
``frac_noise = 0.2``; its levels raise ``frac_noise`` to 0.4, 0.6, 0.8. Worked example
(``vocab_size=12, seq_len=12, noise_vocab_size=4, frac_noise=0.5``: keys ``[0, 4)``, values
``[4, 8)``, noise ``[8, 12)``; test split, MAD-lab's 11-token layout)::

    inputs = [1 4  10 10  1 4  10 11  8 10  1]
    labels = [. .  .  .   4 .  .  .   .  .  4]     (. = -100)

In training (``train_targets = "next_token"``, MAD) the noise tokens are next-token targets
too, as MAD trains on the shifted input everywhere.
"""

from __future__ import annotations

from pydantic import Field

from mixerzoo.tasks import TASKS
from mixerzoo.tasks.mad_in_context_recall import MADInContextRecall


@TASKS.register("mad_noisy_recall")
class MADNoisyRecall(MADInContextRecall):
    """MAD noisy in-context recall: in-context recall with noise pairs (arXiv 2403.17844)."""

    class Params(MADInContextRecall.Params):
        vocab_size: int = Field(32, ge=3, description="vocabulary size V incl. noise (MAD levels: 32 .. 144)")
        noise_vocab_size: int = Field(16, ge=0, description="noise tokens N, taken from the vocabulary")
        frac_noise: float = Field(
            0.2, ge=0.0, lt=1.0, description="probability a pair slot is noise (MAD levels: 0.2 .. 0.8)"
        )
