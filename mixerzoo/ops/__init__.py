"""Kernels: every op family has a plain reference form beside its fast forms (fla's layering).

A form is named by how it computes, ``<op>_<form>``:

* ``<op>_recurrent``: one step per position, the state carried along (``<op>_step`` is one step,
  what a mixer's recurrent ``step`` calls);
* ``<op>_chunk``: quadratic only inside chunks of ``c`` steps, states passed between chunks, run in
  segments recomputed in the backward pass (``recompute.py``); linear in the length;
* ``<op>_parallel``: the whole (l x l) matrix.

The recurrent form is the reference where an op has one, the parallel form otherwise. A fast
form that is none of the three carries the op's bare name (LaS's pooling moved onto the values,
n-gram attention's sorted prefix sums, windowed softmax attention's blocks). Recurrent and chunk
forms take ``initial`` (None: the empty state) and return ``(output, final state)``; parallel
forms return the output.
``tests/ops/test_parity.py`` compares every fast form with its reference: outputs, final states
and the gradients of every input.

Each family keeps one layout, written in its module's docstring with its dimension names
(``b`` batch, ``l`` length, ``h`` heads, ``e`` / ``f`` key / value width, ``d`` channels,
``c`` chunk length). The scans and the per-channel ops are time-major (b, l, ...), as their
mixers project them; the multi-head attention-like families are head-major (b, h, l, e). No
form transposes its inputs to another family's layout:

========================  =======================  =================  ================================
family                    module                   layout             forms
========================  =======================  =================  ================================
diagonal, selective scan  ``scan.py``              (b, l, ...)        recurrent, chunk
SSD (Mamba-2)             ``ssd.py``               (b, l, h, p)       recurrent, chunk
WKV of RWKV-4             ``wkv4.py``              (b, l, d)          recurrent, chunk, step
linear attention          ``linear_attention.py``  (b, h, l, e)       recurrent, parallel, chunk
retention (RetNet)        ``retention.py``         (b, h, l, e)       recurrent, parallel, chunk, step
gated linear attention    ``gla.py``               (b, h, l, e)       recurrent, chunk, step
(gated) delta rule        ``delta_rule.py``        (b, h, l, e)       recurrent, chunk, step
WKV of RWKV-6, RWKV-7     ``wkv.py``               (b, h, l, e)       recurrent, chunk
LaS attention             ``las.py``               (b, h, ..., l, e)  parallel, las_attention
n-gram attention          ``ngram.py``             (b, l, d)          parallel, ngram_attention
causal softmax attention  ``attention.py``         (b, h, l, e)       parallel, causal_attention
========================  =======================  =================  ================================

Shared helpers: ``heads.py`` (heads and chunk padding), ``recompute.py``, ``conv.py`` (causal
and FFT convolutions), ``ssm_kernel.py`` (S4D kernels), ``rotary.py``, ``alibi.py``,
``cross_entropy.py``, ``precision.py`` (float32 for ops that have no bf16 / fp16 kernel).
"""
