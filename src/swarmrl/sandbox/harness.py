"""The code that runs inside the sandbox: a trusted harness and an untrusted worker.

Standard library only, and never imported by swarmrl itself: its source is handed to the
sandboxed interpreter (`python -I -S -c SOURCE harness|worker|program ...`). In the
persistent mode (forkserver.py) the harness and the worker are forked children of a server
instead of fresh interpreters; everything below holds for both.

Why two processes. Tested code and test code in one interpreter means the tested code can
forge anything that process reports: `sys.exit(0)` before the tests, an `__eq__` that is
always True, ctypes writing a fake verdict to any descriptor it finds. So the roles split:

* the **harness** (trusted) runs the dataset's test code and holds the result channel, a
  pipe the parent opened before the sandbox started. It makes itself non-dumpable first,
  so a same-uid process cannot ptrace it, read its memory or open `/proc/<pid>/fd/<n>`
  (that would need CAP_SYS_PTRACE, which nothing in the sandbox has);
* the **worker** (untrusted) loads the submission and answers calls. It gets two private
  pipes (requests in, plain-data replies out) and none of the harness's descriptors. For
  `assert` and `call` tests, the harness calls `candidate(...)` through an RPC proxy and
  the worker returns the value as tagged JSON: only data (numbers, strings, lists, ...),
  never objects, so the comparison happens in the harness on real values. For `stdio`
  tests the worker is the submitted program, run once per test with the test's stdin; the
  harness compares its stdout.

The worker can lie only about return values, which is what a solution does anyway; it
can kill the harness (same uid), which leaves no result: the parent scores that 0.
"""

import json
import os
import sys
import time

# select, signal and subprocess are imported by the harness only (in `harness`): the worker
# starts once per execution, and those imports were a third of its start-up time.
select = signal = subprocess = None

_HDR = 8  # length prefix of an RPC frame: 8 ASCII hex digits


# ---------------------------------------------------------------- tagged JSON for plain data
def encode(v, depth=0):
    """Plain data -> JSON-safe tagged form; anything else -> {"o": type name} (opaque)."""
    if depth > 100:
        raise ValueError("nested too deep")
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return {"i": str(v)} if abs(v) > 2 ** 53 else v
    if isinstance(v, float):
        return v if v == v and v not in (float("inf"), float("-inf")) else {"f": repr(v)}
    if isinstance(v, (list, tuple, set, frozenset)):
        tag = {list: "l", tuple: "t", set: "s", frozenset: "z"}.get(type(v))
        if tag is None:
            return {"o": type(v).__name__}
        return {tag: [encode(x, depth + 1) for x in v]}
    if type(v) is dict:
        return {"d": [[encode(k, depth + 1), encode(x, depth + 1)] for k, x in v.items()]}
    if type(v) is bytes:
        return {"b": v.hex()}
    if type(v) is complex:
        return {"c": [v.real, v.imag]}
    return {"o": type(v).__name__}


class Opaque:
    """A value the worker could not send as data: equal to nothing, so it passes no test."""

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return False

    __hash__ = None

    def __repr__(self):
        return "<unsendable %s>" % self.name


def decode(v):
    if not isinstance(v, dict):
        if isinstance(v, list):
            raise ValueError("untagged list")
        return v
    (tag, x), = v.items()
    if tag == "i":
        return int(x)
    if tag == "f":
        return float(x)
    if tag == "o":
        return Opaque(str(x))
    if tag == "b":
        return bytes.fromhex(x)
    if tag == "c":
        return complex(*x)
    if tag == "d":
        return {decode(k): decode(y) for k, y in x}
    conv = {"l": list, "t": tuple, "s": set, "z": frozenset}[tag]
    return conv(decode(y) for y in x)


# ---------------------------------------------------------------- framing
def send(fd, obj):
    data = json.dumps(obj).encode()
    data = b"%08x" % len(data) + data
    while data:
        data = data[os.write(fd, data):]


def recv(fd, deadline, cap):
    """One frame, or raise EOFError (peer gone) / TimeoutError (deadline) / ValueError (bad)."""
    head = _read(fd, _HDR, deadline)
    n = int(head, 16)
    if n > cap:
        raise ValueError("reply larger than %d bytes" % cap)
    return json.loads(_read(fd, n, deadline))


def _read(fd, n, deadline):
    buf = b""
    while len(buf) < n:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and (left <= 0 or not select.select([fd], [], [], left)[0]):
            raise TimeoutError
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


# ---------------------------------------------------------------- worker (untrusted side)
def worker(req_fd, rep_fd):
    job = recv(req_fd, None, 1 << 30)
    ns = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        exec(compile(job["setup"], "<prompt>", "exec"), ns)
        exec(compile(job["solution"], "<solution>", "exec"), ns)
        send(rep_fd, {"loaded": True})
    except BaseException as e:  # SystemExit included: the submission ended before the tests
        send(rep_fd, {"loaded": False, "exc": type(e).__name__, "msg": str(e)[:300]})
        os._exit(0)
    while True:
        req = recv(req_fd, None, 1 << 30)
        try:
            fn = ns[req["name"]]
            out = {"ok": encode(fn(*decode(req["args"])))}
        except BaseException as e:
            out = {"exc": type(e).__name__, "msg": str(e)[:300]}
        send(rep_fd, out)


def program():
    """A stdio test: the submission runs as the main program."""
    src = sys.stdin.buffer.read(int(sys.argv[2]))  # the source comes first on stdin, then the input
    sys.argv = ["solution.py"]
    exec(compile(src, "solution.py", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})


# ---------------------------------------------------------------- harness (trusted side)
class Stop(BaseException):
    """Ends the test run (timeout, memory, worker gone); BaseException so test code's
    `except Exception` cannot swallow it."""

    def __init__(self, status, detail):
        self.status, self.detail = status, detail


class CandidateError(Exception):
    """The submission raised inside a call; a test fails unless it expected that."""


# In the persistent mode (forkserver.py) the worker was forked before the job was read:
# (process, request pipe, reply pipe). Empty: start a fresh interpreter.
PREFORKED = []


class Forked:
    """A forked child with the part of Popen's interface that Worker uses."""

    def __init__(self, pid):
        self.pid, self.returncode = pid, None

    def poll(self, flags=os.WNOHANG):
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, flags)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self):
        return self.poll(0)


class Worker:
    def __init__(self, job, deadline):
        self.deadline, self.cap = deadline, job["max_reply_bytes"]
        if PREFORKED:
            self.proc, self.req, self.rep = PREFORKED.pop()
        else:
            req_r, req_w = os.pipe()
            rep_r, rep_w = os.pipe()
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-u", "-c", job["harness_source"], "worker", str(req_r), str(rep_w)],
                stdin=subprocess.DEVNULL, pass_fds=(req_r, rep_w), start_new_session=True)
            os.close(req_r)
            os.close(rep_w)
            self.req, self.rep = req_w, rep_r
        job["untrusted_ran"] = True
        send(self.req, {"setup": job["setup"], "solution": job["solution"]})
        got = self._reply()
        if not got.get("loaded"):
            raise Stop("memory" if got.get("exc") == "MemoryError" else "error", "solution failed to load: %s: %s" % (got.get("exc"), got.get("msg")))

    def _reply(self):
        try:
            got = recv(self.rep, self.deadline, self.cap)
            if isinstance(got, dict):
                return got
            raise ValueError("reply is not an object")
        except TimeoutError:
            self.kill()
            raise Stop("timeout", "time limit reached")
        except Exception as e:  # EOF, or anything the worker wrote instead of a reply
            time.sleep(0.01)  # let a dying worker finish dying, so its own signal is seen
            died = self.proc.poll()  # None: still running (junk reply), else how it ended
            code = self.kill()
            status = "timeout" if died in (-signal.SIGXCPU, -signal.SIGKILL) else "error"
            raise Stop(status, "worker ended (exit %s) %s" % (code, type(e).__name__))

    def call(self, name, args):
        try:
            send(self.req, {"name": name, "args": encode(list(args))})
        except OSError:
            self._reply()  # the worker is gone: raises Stop with its exit status
        got = self._reply()
        if "exc" in got:
            if got["exc"] == "MemoryError":
                raise Stop("memory", "MemoryError in the solution")
            raise CandidateError("%s: %s" % (got["exc"], got["msg"]))
        return decode(got["ok"])

    def kill(self):
        for kill in (os.killpg, os.kill):  # the group, and the worker itself if it has none yet
            try:
                kill(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
        return self.proc.wait()


def run_stdio(job, test, deadline):
    """Run the program on one input; True if its stdout matches (trailing spaces ignored)."""
    src = job["setup"].encode() + b"\n" + job["solution"].encode()
    try:
        proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", job["harness_source"], "program", str(len(src))],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                start_new_session=True)
    except OSError as e:  # after untrusted code ran (a leftover fork bomb), it is the code's fault
        raise Stop("error" if job["untrusted_ran"] else "infra_error", "cannot start the program: %s" % e)
    job["untrusted_ran"] = True
    data = src + test["stdin"].encode()
    out, cap = b"", job["max_reply_bytes"]
    os.set_blocking(proc.stdin.fileno(), False)
    fds = [proc.stdout.fileno()]
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise Stop("timeout", "time limit reached")
        w = [proc.stdin.fileno()] if data else []
        r, w, _ = select.select(fds, w, [], left)
        if w:
            try:
                data = data[os.write(proc.stdin.fileno(), data[:65536]):]
            except BrokenPipeError:
                data = b""
            if not data:
                proc.stdin.close()
        if r:
            chunk = os.read(fds[0], 65536)
            if not chunk:
                break
            out += chunk[: max(0, cap - len(out))]
    try:  # stdout closed; the program may still be running
        code = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise Stop("timeout", "time limit reached")
    if code in (-signal.SIGXCPU, -signal.SIGKILL):
        raise Stop("timeout", "CPU time limit reached")
    return code == 0 and _norm(out.decode(errors="replace")) == _norm(test["stdout"])


def _norm(s):
    return "\n".join(line.rstrip() for line in s.strip().splitlines())


def _same(a, b):
    """Call-test equality: tuples and lists compare alike (JSON datasets have no tuples)."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def run_tests(job, deadline):
    """-> (passed flags, status, detail)."""
    tests, passed = job["tests"], []
    status, detail, worker_ = "pass", "", None
    ns = {"__name__": "__harness__"}
    try:
        exec(compile(job["setup"], "<prompt>", "exec"), ns)  # trusted helpers the tests use
        if any(t["kind"] != "stdio" for t in tests):
            worker_ = Worker(job, deadline)
            proxy = lambda *args: worker_.call(job["entry_point"], args)  # noqa: E731
            ns["candidate"] = ns[job["entry_point"]] = proxy
        for t in tests:
            try:
                if t["kind"] == "stdio":
                    ok = run_stdio(job, t, deadline)
                elif t["kind"] == "call":
                    ok = _same(ns["candidate"](*t["args"]), t["expected"])
                else:
                    exec(compile(t["code"], "<test>", "exec"), ns)
                    ok = True
            except Exception as e:
                ok, detail = False, detail or "%s: %s" % (type(e).__name__, str(e)[:200])
            if t.get("counted", True):
                passed.append(ok)
    except Stop as s:
        status, detail = s.status, s.detail
    finally:
        if worker_ is not None:
            worker_.kill()
    n = sum(1 for t in tests if t.get("counted", True))
    passed += [False] * (n - len(passed))
    if status == "pass" and not all(passed):
        status = "fail"
    return passed, status, detail


def harness(result_fd):
    global select, signal, subprocess
    import select
    import signal
    import subprocess
    os.set_inheritable(result_fd, False)
    # Signals the tested code can send us (same uid) must not turn into an infra_error
    # below; SIGKILL still ends us, which leaves no verdict and scores 0.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2,
                signal.SIGALRM, signal.SIGQUIT, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    import ctypes
    if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 4
        raise SystemExit("prctl(PR_SET_DUMPABLE) failed")
    job = json.loads(sys.stdin.buffer.read())
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.write(result_fd, b'{"event": "started"}\n')
    deadline = time.monotonic() + job["time_budget_s"]
    job["untrusted_ran"] = False
    try:
        passed, status, detail = run_tests(job, deadline)
    except Exception as e:
        # Before any submitted code ran, a failure is ours or the dataset's: infra_error.
        # After, the code may have provoked it (e.g. by exhausting processes): its error.
        status = "error" if job["untrusted_ran"] else "infra_error"
        passed, detail = [], "harness failed: %s: %s" % (type(e).__name__, str(e)[:300])
    os.write(result_fd, json.dumps({"event": "result", "passed": passed, "status": status,
                                    "detail": detail}).encode() + b"\n")


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "harness":
        harness(int(sys.argv[2]))
    elif mode == "worker":
        worker(int(sys.argv[2]), int(sys.argv[3]))
    elif mode == "program":
        program()
