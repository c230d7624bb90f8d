"""Pickles that reach code through what the allowlist lets through: an allowed function that
calls its argument, a class rebuilt with state whose __setstate__ runs, and a BUILD that plants
__setstate__ or swaps the object's class for the next BUILD to call.

Every callable the payloads name is off every deny list: each is only ever named as a value (an
argument, a state attribute), never called by the pickle itself, which an allowlist that judges
calls alone would take for a reference (a warning). Under torch.load(weights_only=False) each
creates PWNED-<case> in the working folder (test_payloads_are_live):

- torch.serialization._open_zipfile_writer(name) creates the file `name` as it opens a torch
  zip writer;
- torch's _DataPipeSerializationWrapper.__setstate__((bytes, False)) is pickle.loads(bytes),
  here a second pickle calling os.system.
"""

from __future__ import annotations

from tests.malicious.make_corpus import (
    MARKER,
    Build,
    Call,
    G,
    NewObj,
    dumps,
    hf_optimizer_case,
    system,
)

WRITER = G("torch.serialization", "_open_zipfile_writer")
WRAPPER = G("torch.utils.data.datapipes.datapipe", "_DataPipeSerializationWrapper")


def reach(name: str, payload, tries: str, words: str, **kw) -> None:
    hf_optimizer_case(f"reach-{name}", payload, tries, words, **kw)


reach("numpy-randomstate-ctor",
      Call(G("numpy.random._pickle", "__randomstate_ctor"),
           (f"{MARKER}reach-numpy-randomstate-ctor", WRITER)),
      "numpy.random._pickle.__randomstate_ctor(name, ctor) calls ctor(name): an allowed RNG "
      "helper handed torch.serialization._open_zipfile_writer, which creates the file",
      r"unsafe.*__randomstate_ctor.*second argument.*_open_zipfile_writer")
reach("numpy-generator-ctor",
      Call(G("numpy.random._pickle", "__generator_ctor"),
           (f"{MARKER}reach-numpy-generator-ctor", WRITER)),
      "numpy.random._pickle.__generator_ctor(name, ctor): the same trampoline through the "
      "Generator helper (protocol 4)",
      r"unsafe.*__generator_ctor.*second argument.*_open_zipfile_writer", protocol=4)
reach("torch-class-setstate",
      Build(NewObj(WRAPPER), (dumps(system("reach-torch-class-setstate")), False)),
      "a torch class rebuilt with state: _DataPipeSerializationWrapper's __setstate__ "
      "pickle.loads the state's bytes, a second pickle calling os.system (the class itself is "
      "only NEWOBJ'd, the plain way)",
      r"unsafe.*_DataPipeSerializationWrapper.*(rebuilt with state|__setstate__)")
reach("planted-setstate",
      Build(Build(NewObj(G("argparse", "Namespace")), {"__setstate__": WRITER}),
            f"{MARKER}reach-planted-setstate"),
      "argparse.Namespace (data) gets an attribute __setstate__ = _open_zipfile_writer; pickle's "
      "next BUILD on it looks __setstate__ up on the instance and calls it with the state",
      r"unsafe.*argparse\.Namespace.*__setstate__")
reach("class-swap",
      Build(Build(NewObj(G("argparse", "Namespace")), (None, {"__class__": WRAPPER})),
            (dumps(system("reach-class-swap")), False)),
      "a Namespace whose slot state sets __class__ to torch's _DataPipeSerializationWrapper "
      "(setattr swaps the class); the next BUILD runs that class's __setstate__, which "
      "pickle.loads a second pickle calling os.system",
      r"unsafe.*argparse\.Namespace.*__class__")
