"""Safetensors headers that Python's json and the Rust loader read differently: a reader built
on json.loads lists tensors in a file `safe_open` refuses (FORMATS.md "Safetensors").

No code runs here: the payload is the disagreement. Their `live` kind, st-differs, proves it
with the stock readers: Python's json lists the header and safetensors' `safe_open` refuses the
file, and only then is the case's marker made (tests/malicious/test_corpus.py, LIVE).
"""

from __future__ import annotations

import struct

from tests.malicious.make_corpus import CONFIG, DAMAGED, case, jdump, put, safetensors

W = b'"dtype":"F32","shape":[4],"data_offsets":[0,16]'
DATA = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)


def st_differs(name: str, header: bytes, data: bytes, tries: str, words: str) -> None:
    def write():
        put(f"{name}/model.safetensors", safetensors(header + b" " * (-len(header) % 8), data))
        put(f"{name}/config.json", jdump(CONFIG))
    case(name=name, path=name, tries=tries, bad=f"{name}/model.safetensors", words=words,
         exits=DAMAGED, live="st-differs")(write)


st_differs("st-dropped-duplicate",
           b'{"__metadata__":{"format":"pt"},"w":"see below","w":{%s}}' % W, DATA,
           "tensor 'w' written twice, the first copy a string: json.loads keeps the second and "
           "lists one sound F32 [4] tensor; safe_open deserializes every copy and refuses the "
           "file", r"'w' \(copy 1 of 2\): entry is not an object|'w' is written twice")
st_differs("st-metadata-twice",
           b'{"__metadata__":{"format":"tf"},"w":{%s},"__metadata__":{"format":"pt"}}' % W, DATA,
           "__metadata__ written twice, format 'tf' then 'pt': json.loads keeps 'pt' (what "
           "transformers checks), safe_open refuses the file (serde: duplicate field)",
           r"__metadata__ is written twice")
st_differs("st-lone-surrogate",
           b'{"__metadata__":{"format":"pt"},"w":{%s},"w\\ud800":{"dtype":"F32","shape":[4],'
           b'"data_offsets":[16,32]}}' % W, DATA * 2,
           "a second tensor named 'w\\ud800' (a lone surrogate escape): json.loads lists two "
           "tensors, serde_json refuses the header, and the name cannot be encoded as UTF-8 "
           "for a report or a terminal", r"lone surrogate")
