"""Where a process's time goes in the C library (``analysis.libc``). The raw lines are py-spy 0.4's own, cut from real
recordings on this box (2026-12-06) of two loops: ``time.mktime`` with TZ unset, and ``socket.sendto`` to
``("localhost", 8125)``; the waiting line is a queue wait of a casebook program."""

from __future__ import annotations

from dflash_diag.analysis.libc import (
    MECHANISM_ENV,
    chains_text,
    libc_chains,
    loader_text,
    mechanisms,
    threads_libc_text,
)
from dflash_diag.model import NativeProfile
from dflash_diag.model.sched import IoRates
from dflash_diag.sources.native_profile import parse_raw

TZSET = ("thread (4050): MainThread;0x7f768aa4524a (libc.so.6);<module> (tzloop.py:5);time_mktime "
         "(libpython3.11.so.1.0);timelocal (libc.so.6);tzset (libc.so.6);0x7f768aae3184 (libc.so.6);"
         "0x7f768aae35ac (libc.so.6);fstatat64 (libc.so.6) 59\n")
_RESOLVE = ("thread (4099): MainThread;0x7fe49b64524a (libc.so.6);<module> (tzloop.py:9);sock_sendto "
            "(socketmodule.c:4367);getsockaddrarg (socketmodule.c:1849);idna_cleanup (socketmodule.c:1618);setipaddr "
            "(socketmodule.c:1190);getaddrinfo (libc.so.6);gethostbyname2_r (libc.so.6);_nss_files_gethostbyname2_r "
            "(libc.so.6);_nss_files_gethostbyname3_r (libc.so.6);")
RESOLVE = (f"{_RESOLVE}__nss_files_fopen (libc.so.6);0x7fe49b694259 (libc.so.6);_IO_file_fopen (libc.so.6);"
           "_IO_file_open (libc.so.6);__open_nocancel (libc.so.6) 9\n"
           f"{_RESOLVE}fclose (libc.so.6);_IO_file_close_it (libc.so.6);__close_nocancel (libc.so.6) 4\n"
           f"{_RESOLVE}__nss_files_fopen (libc.so.6);fseeko64 (libc.so.6);_IO_file_seekoff (libc.so.6);"
           "_IO_doallocbuf (libc.so.6);_IO_file_doallocate (libc.so.6);fstatat64 (libc.so.6) 1\n"
           "thread (4099): MainThread;0x7fe49b64524a (libc.so.6);<module> (tzloop.py:9);sock_sendto "
           "(socketmodule.c:4381);sock_call (socketmodule.c:972);sock_call_ex (socketmodule.c:921);sendto "
           "(libc.so.6) 12\n")
WAITING = ("thread (4640): MainThread;<module> (train.py:88);main (train.py:70);get (queue.py:171);"
           "wait (threading.py:320);lock_PyThread_acquire_lock (libpython3.11.so.1.0);"
           "pthread_cond_timedwait (libc.so.6) 300\n")
COMPUTE = ("thread (4642): featurizer;thread_run (libpython3.11.so.1.0);features (invoices.py:42);"
           "dec_mpd_qsqrt (_decimal.c:4312);_mpd_mul_words (typearith.h:56) 20\n")


def test_a_time_zone_stat_under_every_mktime_is_its_chain_and_the_unset_tz_its_mechanism() -> None:
    chains = libc_chains(parse_raw(TZSET + WAITING))  # the waiting thread's samples are not work
    assert len(chains) == 1
    chain = chains[0]
    assert chain.calls == ("timelocal", "tzset", "fstatat64") and chain.share == 1.0
    assert chain.syscalls == ("fstatat64",) and chain.syscall_share == 1.0
    text = chains_text(parse_raw(TZSET), {})
    assert text.startswith("its native samples in the C library: timelocal > tzset > fstatat64 100%, ending in "
                           "system calls (fstatat64): TZ is not set in its environment"), text
    # TZ set: the chain is said, the mechanism that needs it unset is not
    assert "TZ is not set" not in chains_text(parse_raw(TZSET), {"TZ": ":/etc/localtime"})
    assert MECHANISM_ENV == ("LD_BIND_NOT", "TZ")


def test_a_host_name_resolved_per_datagram_is_its_own_chain_beside_the_send() -> None:
    chains = libc_chains(parse_raw(RESOLVE))
    assert [c.calls[0] for c in chains] == ["getaddrinfo", "sendto"]
    lookup = chains[0]
    assert lookup.share == 14 / 26 and lookup.calls[-1] == "__open_nocancel"  # its commonest path down
    assert lookup.syscalls == ("__open_nocancel", "__close_nocancel", "fstatat64")
    text = str(lookup)
    assert text.startswith("getaddrinfo > gethostbyname2_r > ... > _IO_file_open > __open_nocancel 54%"), text
    # a long chain keeps its ends
    said = mechanisms(chains, {})
    assert len(said) == 1 and said[0].startswith("a host name resolved again on every call")


def test_code_of_its_own_few_samples_or_small_shares_say_nothing() -> None:
    assert libc_chains(parse_raw(COMPUTE)) == ()  # decimal's C code, no C library call
    assert libc_chains(parse_raw(TZSET.replace(" 59\n", " 3\n"))) == ()  # fewer samples than native.MIN_SAMPLES
    # a chain under MIN_CHAIN_SHARE of the working samples is left out
    small = TZSET.replace(" 59\n", " 10\n") + COMPUTE.replace(" 20\n", " 90\n")
    assert libc_chains(parse_raw(small)) == () and chains_text(parse_raw(small), {}) == ""


def test_a_threads_chains_are_its_own_and_lead_with_the_c_library() -> None:
    """Of a process's own profile, only the threads asked about are charged (the TZ loop's thread 4050, not the
    sender 4099); the text leads "in the C library" and the mechanism needs the process's TZ unset."""
    profile = NativeProfile(rate_hz=20.0, duration_s=2.5, samples=85, stacks=parse_raw(TZSET + RESOLVE))
    text = threads_libc_text(profile, {4050}, {})
    assert text.startswith("in the C library: timelocal > tzset > fstatat64 100%"), text
    assert "TZ is not set" in text and "getaddrinfo" not in text
    assert "TZ is not set" not in threads_libc_text(profile, {4050}, {"TZ": "UTC"})
    assert threads_libc_text(profile, {4099}, {}).startswith("in the C library: getaddrinfo > ")
    assert threads_libc_text(None, {4050}, {}) == "" and threads_libc_text(profile, {1}, {}) == ""


def test_the_threads_hand_offs_are_not_a_use_of_the_c_library() -> None:
    """A condition signal under a binding's call (numpy waking its pool, the interpreter handing over the GIL) is the
    threads' hand-off, said by other findings; it is no chain."""
    signal = ("thread (77): MainThread;main (train.py:128);array_argmax (_multiarray_umath.cpython-311-x86_64-linux-"
              "gnu.so);pthread_cond_signal (libc.so.6) 30\n")
    assert libc_chains(parse_raw(signal)) == ()
    assert [c.calls[0] for c in libc_chains(parse_raw(signal + TZSET))] == ["timelocal"]


URANDOM = ("thread (25154): MainThread;<module> (mech.py:6);SystemRandom.random (random.py:798);os_urandom "
           "(libpython3.11.so.1.0);getrandom (libc.so.6) 16\n"
           "thread (25154): MainThread;<module> (mech.py:6);SystemRandom.random (random.py:798);os_urandom "
           "(libpython3.11.so.1.0) 5\n")


def test_random_numbers_from_the_kernel_are_a_system_call_per_draw() -> None:
    """A SystemRandom loop (py-spy's lines from it): getrandom is the chain, and the mechanism says the way out."""
    (chain,) = libc_chains(parse_raw(URANDOM))
    assert chain.calls == ("getrandom",) and chain.share == 16 / 21 and chain.syscalls == ("getrandom",)
    assert "a system call per draw" in chains_text(parse_raw(URANDOM), {})


def test_reads_that_carry_a_byte_each_are_said_from_the_processs_counters() -> None:
    """A thread's chain ends in read (an unbuffered pipe iterated line by line): with the process's counters at
    1.3 million read calls a second of one byte each, the chain says so; counters of large reads, or few calls, add
    nothing, and a chain that does not read takes no read counts."""
    reads = ("thread (9): reader;record_reader (train.py:63);_io_FileIO_readinto (fileio.c:1);read (libc.so.6) 40\n")
    profile = NativeProfile(rate_hz=20.0, duration_s=2.5, samples=40, stacks=parse_raw(reads))
    tiny = IoRates(read_calls=1_341_660.0, read_bytes=1_341_660.0, storage_bytes=0.0, write_calls=10.0,
                   written_bytes=4096.0)
    text = threads_libc_text(profile, {9}, {}, tiny)
    assert text.startswith("in the C library: read 100%, ending in system calls (read); the process made 1,341,660 "
                           "read calls a second of 1 byte each on average: a system call per few bytes"), text
    big = IoRates(read_calls=5_000.0, read_bytes=5_000.0 * 65536, storage_bytes=0.0, write_calls=0.0, written_bytes=0.0)
    assert "calls a second" not in threads_libc_text(profile, {9}, {}, big)
    few = IoRates(read_calls=100.0, read_bytes=100.0, storage_bytes=0.0, write_calls=0.0, written_bytes=0.0)
    assert "calls a second" not in threads_libc_text(profile, {9}, {}, few)
    tz = NativeProfile(rate_hz=20.0, duration_s=2.5, samples=59, stacks=parse_raw(TZSET))
    assert "read calls" not in threads_libc_text(tz, {4050}, {}, tiny)


def test_a_gil_holders_reads_of_a_byte_each_are_said_beside_it() -> None:
    """Batch 18's unbuffered-pipe program from outside (its recording): the headline is the GIL the reader holds at
    `for line in stream:`, and the holder's native look now says its read chain and the bytes a call."""
    import gzip
    from pathlib import Path

    from dflash_diag.analysis import analyse
    from dflash_diag.observe.codec import read_observation

    path = Path(__file__).resolve().parents[1] / "casebook" / "observations" / "settings18_sorrel__outside.json.gz"
    analysis = analyse(read_observation(gzip.open(path).read()))
    assert analysis.headline is not None
    text = analysis.headline.text
    assert "holds it" in text and "in the C library: read" in text, text
    assert "read calls a second of 1 byte each on average: a system call per few bytes" in text, text


LOADER = ("thread (12865): MainThread;<module> (ldb.py:5);ufunc_generic_fastcall (numpy/_core/_multiarray_umath.cpython-"
          "311-x86_64-linux-gnu.so);PyArray_NewFromDescr (numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so);"
          "0x7f68d012730a (ld-linux-x86-64.so.2);0x7f68d0124f0e (ld-linux-x86-64.so.2) 33\n"
          "thread (12865): MainThread;<module> (ldb.py:5);ufunc_generic_fastcall (numpy/_core/_multiarray_umath.cpython-"
          "311-x86_64-linux-gnu.so);DOUBLE_sqrt (numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so) 7\n")


def test_the_dynamic_linker_running_under_calls_is_said_with_ld_bind_not_where_it_is_set() -> None:
    """A NumPy loop under LD_BIND_NOT=1 (py-spy's lines from one, the linker's symbols stripped): the linker's
    library holds most working samples, said with the variable where the environment read has it."""
    text = loader_text(parse_raw(LOADER), {"LD_BIND_NOT": "1"})
    assert text.startswith("the dynamic linker (ld-linux-x86-64.so.2) runs in 82% of its working samples"), text
    assert "LD_BIND_NOT=1 in its environment: a lazily bound function is resolved again on every call" in text
    assert "LD_BIND_NOT" not in loader_text(parse_raw(LOADER), {})
    assert loader_text(parse_raw(LOADER.replace(" 33\n", " 1\n")), {}) == ""  # 8 working samples: too few to say
    assert chains_text(parse_raw(LOADER), {}).startswith("the dynamic linker")  # no C library chain: the linker alone
