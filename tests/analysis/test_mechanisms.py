"""What the code a thread's time goes to is known to do (``analysis.mechanisms``). The native lines are py-spy 0.4's
raw format, as doctor's native look records them; the Python rows are samples as py-spy's dumps give them."""

from __future__ import annotations

from dflash_contract.code_knobs import KNOB_BY_NAME
from dflash_contract.settings import ENV_BY_NAME
from dflash_diag.analysis.mechanisms import (
    MIN_SHARE,
    line_mechanisms,
    mechanisms_text,
    native_mechanisms,
    python_mechanisms,
)
from dflash_diag.model import Frame, ThreadSample, ThreadState
from dflash_diag.sources.native_profile import parse_raw

STDLIB = "/usr/lib/python3.11"
SITE = f"{STDLIB}/site-packages"
TRACEMALLOC = ("thread (501): reader;thread_run (libpython3.11.so.1.0);parse (reader.py:12);"
               "_PyObject_Malloc (libpython3.11.so.1.0);tracemalloc_alloc (libpython3.11.so.1.0);"
               "traceback_new (libpython3.11.so.1.0) {n}\n")
COMPUTE = ("thread (501): reader;thread_run (libpython3.11.so.1.0);parse (reader.py:14);"
           "scanner_call (_json.c:1200);scan_once_unicode (_json.c:1100) {n}\n")
WAITING = ("thread (501): reader;thread_run (libpython3.11.so.1.0);get (queue.py:171);wait (threading.py:320);"
           "lock_PyThread_acquire_lock (libpython3.11.so.1.0);pthread_cond_timedwait (libc.so.6) {n}\n")
NUMPY = ("thread (502): featurizer;thread_run (libpython3.11.so.1.0);featurize (train.py:40);"
         "ufunc_generic_fastcall (_multiarray_umath.cpython-311-x86_64-linux-gnu.so);"
         "npyiter_copy_to_buffers (_multiarray_umath.cpython-311-x86_64-linux-gnu.so) {n}\n")
DEBUG_LIB = ("thread (503): main;main (train.py:9);malloc (libc_malloc_debug.so.0);"
             "0x7f00000010 (libc_malloc_debug.so.0) {n}\n")


def test_a_native_mechanism_is_said_by_its_share_of_the_working_samples() -> None:
    # 30 of 100 working samples record a traceback; the 400 waiting ones are not work.
    seen = native_mechanisms(parse_raw(TRACEMALLOC.format(n=30) + COMPUTE.format(n=70)
                                       + WAITING.format(n=400)))
    assert len(seen) == 1 and abs(seen[0].share - 0.30) < 1e-9
    assert seen[0].where == "tracemalloc_alloc"
    text = mechanisms_text(seen)
    assert text == ("; known there: tracemalloc records a traceback for every allocation (tracemalloc.start(), "
                    "PYTHONTRACEMALLOC, -X tracemalloc): 30% of its working samples in `tracemalloc_alloc`")
    # Below the share (a look-alike: tracemalloc on for a moment), nothing.
    few = int(MIN_SHARE * 100) - 1
    assert native_mechanisms(parse_raw(TRACEMALLOC.format(n=few) + COMPUTE.format(n=100 - few))) == ()
    # Only waiting samples: nothing to weigh.
    assert native_mechanisms(parse_raw(WAITING.format(n=50))) == ()


def test_the_largest_mechanisms_come_first_and_a_library_bound_one_needs_its_library() -> None:
    seen = native_mechanisms(parse_raw(TRACEMALLOC.format(n=20) + NUMPY.format(n=60) + COMPUTE.format(n=20)
                                       + DEBUG_LIB.format(n=25)))
    assert [s.where for s in seen] == ["npyiter_copy_to_buffers", "malloc"]
    assert "np.setbufsize" in str(seen[0]) and "libc_malloc_debug.so" in str(seen[1])
    # The same function names in another library are not glibc's malloc debugging.
    plain = DEBUG_LIB.replace("libc_malloc_debug.so.0", "libc.so.6")
    assert native_mechanisms(parse_raw(plain.format(n=25))) == ()


def _row(state: ThreadState, *frames: tuple[str, str]) -> tuple[ThreadSample, ThreadState]:
    return (ThreadSample(thread_id=1, os_thread_id=11, name="writer", active=True, owns_gil=True,
                         frames=tuple(Frame(name, filename, 10) for name, filename in frames)), state)


def test_a_library_python_mechanism_is_said_from_the_ordinary_samples() -> None:
    own = ("write_batch", "/srv/app/train.py")
    pure_json = _row(ThreadState.PYTHON, ("_iterencode_dict", f"{STDLIB}/json/encoder.py"),
                     ("_iterencode", f"{STDLIB}/json/encoder.py"), ("dumps", f"{STDLIB}/json/__init__.py"), own)
    rows = [pure_json] * 4 + [_row(ThreadState.PYTHON, own)] * 6 + [_row(ThreadState.QUEUE_GET, own)] * 10
    (seen,) = python_mechanisms(rows)
    assert seen.share == 0.4 and seen.where == "json/encoder.py:_iterencode"  # of the 10 working samples
    assert "pure-Python encoder" in str(seen) and "json.dump to a file" in str(seen)
    # The C encoder's samples end in the program's line (json.dumps calls into C): nothing is said.
    c_json = _row(ThreadState.PYTHON, ("dumps", f"{STDLIB}/json/__init__.py"), own)
    assert python_mechanisms([c_json] * 10) == ()
    # A package's file under site-packages is keyed by its import path.
    printed = _row(ThreadState.PYTHON, ("_tensor_str", f"{SITE}/torch/_tensor_str.py"), own)
    assert python_mechanisms([printed] * 3 + [_row(ThreadState.PYTHON, own)] * 7)[0].where == \
        "torch/_tensor_str.py:_tensor_str"
    # The program's own file named like a library module is the program's.
    mine = _row(ThreadState.PYTHON, ("_iterencode", "/srv/app/json/encoder.py"), own)
    assert python_mechanisms([mine] * 10) == ()


def test_every_mechanism_is_listed_when_asked_and_the_settings_that_decide_one_are_named() -> None:
    own = ("load_shard", "/srv/app/shards.py")
    unpickle = _row(ThreadState.PYTHON, ("load", f"{SITE}/torch/_weights_only_unpickler.py"),
                    ("load", f"{SITE}/torch/serialization.py"), own)
    printed = _row(ThreadState.PYTHON, ("_showwarnmsg", f"{STDLIB}/warnings.py"), own)
    traced = _row(ThreadState.PYTHON, ("extract_stack", f"{STDLIB}/traceback.py"), own)
    rows = [unpickle] * 5 + [printed] * 3 + [traced] * 2
    assert len(python_mechanisms(rows)) == 2  # the shown ones
    every = python_mechanisms(rows, shown=None)
    assert [s.where for s in every] == ["torch/_weights_only_unpickler.py:load", "warnings.py:_showwarnmsg",
                                        "traceback.py:extract_stack"]
    assert every[0].mechanism.settings == ("TORCH_FORCE_WEIGHTS_ONLY_LOAD",)
    assert every[1].mechanism.settings == ("PYTHONWARNINGS",) and every[2].mechanism.settings == ()


def test_per_request_connections_and_pure_python_parsers_are_known_mechanisms() -> None:
    own = ("fetch", "/srv/app/loader.py")
    resolve = _row(ThreadState.PYTHON, ("getaddrinfo", f"{STDLIB}/socket.py"),
                   ("create_connection", f"{STDLIB}/socket.py"), ("connect", f"{STDLIB}/http/client.py"), own)
    yaml = _row(ThreadState.PYTHON, ("scan_plain", f"{SITE}/yaml/scanner.py"), ("load", f"{SITE}/yaml/__init__.py"),
                own)
    seen = python_mechanisms([resolve] * 3 + [yaml] * 5 + [_row(ThreadState.PYTHON, own)] * 2)
    assert [s.where for s in seen] == ["yaml/scanner.py:scan_plain", "socket.py:create_connection"]
    assert "CSafeLoader" in str(seen[0]) and "keep-alive" in str(seen[1])
    lookup = ("thread (601): fetcher;fetch (loader.py:20);getaddrinfo (libc.so.6);gaih_inet.constprop.0 (libc.so.6);"
              "__res_context_send (libc.so.6) {n}\n")
    (native,) = native_mechanisms(parse_raw(lookup.format(n=40) + COMPUTE.format(n=60)))
    assert native.where == "getaddrinfo" and native.mechanism.settings == ("RES_OPTIONS", "LOCALDOMAIN")
    # A CA bundle parsed per new SSL context: decided by the variables that name the bundle, and not undone by
    # setting them back (the system's bundle costs as much): its remedy is the context's reuse.
    bundle = ("thread (602): fetcher;fetch (loader.py:20);_ssl__SSLContext_load_verify_locations (_ssl.c.h);"
              "X509_load_cert_crl_file_ex (libcrypto.so.3);PEM_X509_INFO_read_bio_ex (libcrypto.so.3) {n}\n")
    (ca,) = native_mechanisms(parse_raw(bundle.format(n=70) + COMPUTE.format(n=30)))
    assert ca.where == "X509_load_cert_crl_file_ex" and "SSL_CERT_FILE" in ca.mechanism.settings
    assert all(name in ENV_BY_NAME for name in ca.mechanism.settings) and "reuse it" in ca.mechanism.remedy
    # NumPy's own einsum loops: decided by np.einsum's optimize argument (whose default, False, runs them).
    loops = ("thread (603): loader;featurize (featurize.py:35);array_einsum (numpy/_core/_multiarray_umath.so);"
             "PyArray_EinsteinSum (numpy/_core/_multiarray_umath.so);"
             "float_sum_of_products_muladd (numpy/_core/_multiarray_umath.so) {n}\n")
    (einsum,) = native_mechanisms(parse_raw(loops.format(n=80) + COMPUTE.format(n=20)))
    assert einsum.where == "PyArray_EinsteinSum" and einsum.mechanism.arguments == ("optimize",)
    assert KNOB_BY_NAME["optimize"].calls == ("einsum",) and KNOB_BY_NAME["optimize"].default == "False"


def test_statement_compiles_regex_engines_and_collective_checks_are_known_with_what_decides_them() -> None:
    prepare = ("thread (701): loader;thread_run (libpython3.11.so.1.0);lookup (store.py:39);"
               "pysqlite_connection_execute (connection.c.h);_pysqlite_query_execute (cursor.c);"
               "pysqlite_statement_create (statement.c);sqlite3_prepare_v2 (libsqlite3.so.0.8.6);"
               "sqlite3RunParser (libsqlite3.so.0.8.6) {n}\n")
    (seen,) = native_mechanisms(parse_raw(prepare.format(n=45) + COMPUTE.format(n=55)))
    assert seen.where == "pysqlite_statement_create" and seen.mechanism.arguments == ("cached_statements",)
    scan = ("thread (703): actor;thread_run (libpython3.11.so.1.0);evict (replay.py:40);"
            "pysqlite_connection_execute (connection.c.h);sqlite3_step (libsqlite3.so.0.8.6);"
            "sqlite3VdbeExec (libsqlite3.so.0.8.6);sqlite3BtreePayloadSize (libsqlite3.so.0.8.6) {n}\n")
    # The statement's virtual machine holds the whole step (its own opcodes too: a nested scan runs mostly there);
    # the row reads below it are the narrower mechanism, both decided by the same pragmas.
    vm_opcodes = scan.replace(";sqlite3BtreePayloadSize (libsqlite3.so.0.8.6)", "")
    vm, rows = native_mechanisms(parse_raw(scan.format(n=15) + vm_opcodes.format(n=30) + COMPUTE.format(n=55)))
    assert vm.where == "sqlite3VdbeExec" and abs(vm.share - 0.45) < 1e-9
    assert rows.where == "sqlite3BtreePayloadSize" and abs(rows.share - 0.15) < 1e-9
    assert vm.mechanism.arguments == rows.mechanism.arguments == ("PRAGMA foreign_keys", "PRAGMA automatic_index")
    bpe = ("thread (704): record-feed;thread_run (libpython3.11.so.1.0);run (feed.py:24);"
           "_RNvMs5_NtNtNtCscxzlFi8rOL3_10tokenizers6models3bpe5modelNtB5_3BPE10merge_word (tokenizers.abi3.so);"
           "_RNvMs3_NtNtNtCscxzlFi8rOL3_10tokenizers6models3bpe4wordNtB5_4Word9merge_all (tokenizers.abi3.so) {n}\n")
    (merges,) = native_mechanisms(parse_raw(bpe.format(n=40) + COMPUTE.format(n=60)))
    assert merges.where.endswith("3BPE10merge_word") and merges.mechanism.arguments == ("cache_capacity",)
    regex = ("thread (702): ingest;thread_run (libpython3.11.so.1.0);ingest (train.py:67);"
             "0x7f79036101fd (_pydantic_core.cpython-311-x86_64-linux-gnu.so);"
             "_sre_SRE_Pattern_search (libpython3.11.so.1.0);sre_search (libpython3.11.so.1.0) {n}\n")
    (seen,) = native_mechanisms(parse_raw(regex.format(n=30) + COMPUTE.format(n=70)))
    assert seen.mechanism.arguments == ("regex_engine",) and abs(seen.share - 0.30) < 1e-9
    # The same function names in a library of another name are not Python's engine.
    assert native_mechanisms(parse_raw(regex.replace("(libpython3.11.so.1.0);sre", "(libfoo.so);sre")
                                       .replace("search (libpython3.11.so.1.0)", "search (libfoo.so)")
                                       .format(n=30))) == ()
    checks = ("thread (703): MainThread;main (train.py:128);sync (gradsync.py:30);"
              "c10d::ProcessGroupWrapper::allreduce (libtorch_cpu.so);"
              "c10d::ProcessGroupWrapper::runCollectiveChecks (libtorch_cpu.so) {n}\n")
    (seen,) = native_mechanisms(parse_raw(checks.format(n=60) + COMPUTE.format(n=40)))
    assert seen.mechanism.settings == ("TORCH_DISTRIBUTED_DEBUG",)
    validate = _row(ThreadState.PYTHON, ("BaseModel.__init__", f"{SITE}/pydantic/main.py"), ("build", "/srv/h.py"))
    (seen,) = python_mechanisms([validate] * 4 + [_row(ThreadState.PYTHON, ("build", "/srv/h.py"))] * 6)
    assert seen.mechanism.arguments == ("revalidate_instances",)


def test_the_lines_that_create_coroutines_are_weighed_by_their_own_text_and_origin_capture_natively() -> None:
    # 3 of 8 working samples stand on an `await f(...)` line itself (no callee frame yet: the coroutine being made);
    # one stands in the callee, one awaits a plain name (no call: nothing created), 2 wait on the queue (not work).
    text = {("/srv/ingest.py", 41): "return await self.position(f, motion)",
            ("/srv/ingest.py", 52): "row, label = await self.fix()",
            ("/srv/ingest.py", 60): "x = await pending",
            ("/srv/ingest.py", 46): "return (f[4] / 100.0, f[5])"}

    def sample(line: int, state: ThreadState = ThreadState.PYTHON) -> tuple[ThreadSample, ThreadState]:
        frame = Frame("Lane.decode", "/srv/ingest.py", line)
        return (ThreadSample(thread_id=1, os_thread_id=11, name="ingest", active=True, owns_gil=True,
                             frames=(frame,)), state)

    rows = [sample(41), sample(41), sample(52), sample(46), sample(60), sample(46), sample(46), sample(46),
            sample(52, ThreadState.QUEUE_PUT), sample(52, ThreadState.QUEUE_GET)]
    (seen,) = line_mechanisms(rows, lambda filename, line: text.get((filename, line)))
    assert abs(seen.share - 3 / 8) < 1e-9 and seen.where == "Lane.decode (ingest.py:41)"
    assert seen.mechanism.arguments == ("set_coroutine_origin_tracking_depth",)
    assert line_mechanisms(rows, lambda filename, line: None) == ()  # no source: nothing said
    # Natively, the capture itself is the interpreter's compute_cr_origin.
    origin = ("thread (501): ingest;thread_run (libpython3.11.so.1.0);decode (ingest.py:41);"
              "_Py_MakeCoro (libpython3.11.so.1.0);compute_cr_origin (libpython3.11.so.1.0) {n}\n")
    (native,) = native_mechanisms(parse_raw(origin.format(n=40) + COMPUTE.format(n=60)))
    assert native.where == "compute_cr_origin" and "set_coroutine_origin_tracking_depth" in native.mechanism.arguments
