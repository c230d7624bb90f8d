"""Code archives: TorchScript whose scripted code torch.jit.load runs, and torch.export `.pt2`
archives whose pickles torch.export.load unpickles.

The archives are written once by the real torch.jit.save and torch.export.save
(make_code_archives.py, which needs torch; its output in code_archives/ is committed) and
copied here, so this module, like make_corpus.py, needs no torch and writes the same bytes
every run. Each payload creates PWNED-<case> in the working folder when the stock loader
opens the file (test_payloads_are_live): torch.jit.load, torch.load (which hands TorchScript
to torch.jit.load) or torch.export.load.
"""

from __future__ import annotations

from tests.malicious.make_corpus import HERE, UNSAFE, case, put

ARCHIVES = HERE / "code_archives"


def code_case(name: str, archive: str, tries: str, words: str, live: str) -> None:
    target = f"{name}/model{archive[archive.rindex('.'):]}"

    def write():
        put(target, (ARCHIVES / archive).read_bytes())

    case(name=name, path=target, bad=target, tries=tries, words=words, exits=UNSAFE,
         live=live)(write)


code_case("code-jit-setstate-save", "jit-setstate-save.pt",
          "a TorchScript module (torch.jit.save) whose scripted __setstate__ calls torch.save: "
          "torch.jit.load rebuilds the module from data.pkl and runs __setstate__, which writes "
          "a file", r"unsafe.*torch\.save", live="jit")
code_case("code-jit-constants-object", "jit-constants-object.pt",
          "a TorchScript archive whose constants.pkl rebuilds an object of a scripted class "
          "whose __setstate__ calls torch.from_file(..., shared=True), which creates the file: "
          "torch.load hands the archive to torch.jit.load, which reads the constants first",
          r"unsafe.*torch\.from_file", live="torch")
code_case("code-export-pickled-constant", "export-pickled-constant.pt2",
          "a torch.export .pt2 whose pickled (use_pickle) constant tensor_0 is a torch.save of "
          "os.system(...): torch.export.load reads it with torch.load(weights_only=False)",
          r"unsafe.*(os|posix)\.system", live="export")
code_case("code-export-sample-inputs", "export-sample-inputs.pt2",
          "a torch.export .pt2 whose sample inputs are a torch.save of os.system(...): "
          "torch.export.load retries them with torch.load(weights_only=False)",
          r"unsafe.*(os|posix)\.system", live="export")
code_case("code-export-sympy-expr", "export-sympy-expr.pt2",
          "a torch.export .pt2 whose program gives a symbolic size the expression "
          "__import__('os').system(...) (torch writes sympy's srepr there): torch.export.load "
          "parses it with sympy.sympify, which evaluates it as Python",
          r"unsafe.*sympy", live="export")
