"""The citations of reports made before the paper key: ``000`` .. ``004`` became CAT, CAT-ws,
Zoology, LaS and ICLL (the README's paper key). Only citation text changes; numbers do not."""

from __future__ import annotations

import re
from typing import Any

KEY = {"000": "CAT", "001": "CAT-ws", "002": "Zoology", "003": "LaS", "004": "ICLL"}
WORDS = (
    r"(?:Sec\.|Secs\.|Section|Fig\.|Figs\.|Figure|Table|Tables|Tab\.|App\.|Appendix|Apps\.|Thm\.|"
    r"Thms\.|Theorem|Prop\.|Props\.|Proposition|Eq\.|Eqs\.|Eq|Alg\.|Algorithm|Def\.|Definition|Claim|"
    r"Listing|Lemma|Cor\.|Corollary|Remark|H\.\d|C\.\d|D\.\d|E\.\d|B\.\d|Fig|Sec|App)"
)


def cite(text: str) -> str:
    """``text`` with every paper code replaced by its key, as the shipped files were rewritten."""
    for code, key in KEY.items():
        text = re.sub(rf"\b{re.escape(key)} \((?:paper )?{code}\)", key, text)
        text = re.sub(rf"\b{re.escape(key)} (?:paper )?{code}\b", key, text)
        text = re.sub(rf"\b[Pp]aper {code}\b", key, text)
        text = re.sub(rf"\b[Pp]apers {code}/(00[0-4])\b", lambda m, k=key: f"{k}/{KEY[m.group(1)]}", text)
        text = re.sub(rf"(?<![\w.,\-/]){code}(?=(?:'s)? {WORDS})", key, text)
        text = re.sub(rf"(?<![\w.,\-/]){code}(?=[,;)] )", key, text)
        text = re.sub(rf"(?<![\w.,\-/]){code}(?=\))", key, text)
        text = re.sub(rf"(?<=[(/ ]){code}(?=/00[0-4])", key, text)
        text = re.sub(rf"(?<=/){code}(?=[:, )])", key, text)
        text = re.sub(rf"(?<=[ (]){code}(?=\n)", key, text)
        text = re.sub(rf"(?<=\(){code}(?=:)", key, text)
        text = re.sub(rf"(?<= ){code}(?= \()", key, text)
        text = re.sub(rf"(?<![\w.,\-/`]){code}(?![\w.,`])", key, text)
    return text


def cited(obj: Any) -> Any:
    """``obj`` (parsed JSON) with :func:`cite` applied to every string in it."""
    if isinstance(obj, str):
        return cite(obj)
    if isinstance(obj, list):
        return [cited(v) for v in obj]
    if isinstance(obj, dict):
        return {k: cited(v) for k, v in obj.items()}
    return obj
