#!/usr/bin/env python3
"""End-to-end: tessera-localai driven the way LocalAI drives an external gRPC backend.

Stubs come from proto/localai/backend.proto (system protoc + grpc_python_plugin, Debian's
python3-grpcio). The test first asserts that our proto's package, service, RPC names and field
numbers and types are LocalAI's wire facts (localai_wire.py), then: spawns
`tessera-localai --addr=127.0.0.1:PORT`, polls Health until "OK" (before any model; GetMetrics and
ModelMetadata answer FAILED_PRECONDITION then), LoadModel (ModelPath + Model, ContextSize,
Threads), GetMetrics (zero, then exactly one Predict's counts), ModelMetadata, Predict and
PredictStream with Logprobs/TopLogprobs (localai_reports.py), Predict and PredictStream (raw prompt
and UseTokenizerTemplate + Messages), TokenizeString, Status, concurrent PredictStream calls (their
token streams must overlap in time: batched, not serialized), Free, UNIMPLEMENTED RPCs (ours and
LocalAI's others), and a second backend with LOCALAI_GRPC_AUTH_TOKEN set (no / wrong / right
`authorization: Bearer` metadata).

Hostile-client checks (issue 23): the worker the backend starts refuses Describe and Run without
its secret; failed LoadModel calls (nothing named, a missing file, /etc/passwd, a non-GGUF file, a
directory) keep the old model serving and echo none of the file's bytes; other spellings of the
loaded file (`/./`, `//`, `..`, a symlink) start no second worker; a reload and a Free during a
stream end that stream (CANCELLED) and leave exactly the live worker (children of the backend,
from /proc); an attached --worker whose Run stream someone else holds does not count as loaded.
`--workers 2` starts two workers per model (data parallel): concurrent Predicts finish, and with one
worker killed the model keeps serving on the other; `--workers` with `--worker` is refused.
Every wait is bounded; everything is on loopback. Exits non-zero with the reason on failure.
"""
import importlib
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "pyclient"))
from tessera_process import parse_e2e_args  # noqa: E402

from e2e_checks import check
from localai_reports import (check_before_load, check_logprobs, check_metrics,
                             check_model_metadata)
from localai_wire import check_undeclared_rpcs, check_wire_facts

def generate_stubs(repo, out_dir):
    proto_root = os.path.join(repo, "proto")
    subprocess.run(
        ["protoc", f"--proto_path={proto_root}", f"--python_out={out_dir}",
         f"--grpc_python_out={out_dir}",
         "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin",
         os.path.join(proto_root, "localai/backend.proto")], check=True)
    sys.path.insert(0, out_dir)
    return (importlib.import_module("localai.backend_pb2"),
            importlib.import_module("localai.backend_pb2_grpc"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(bin_dir, token=None, extra_args=()):
    env = dict(os.environ)
    env.pop("LOCALAI_GRPC_AUTH_TOKEN", None)
    env.pop("TESSERA_WORKER_SECRET", None)
    if token is not None:
        env["LOCALAI_GRPC_AUTH_TOKEN"] = token
    port = free_port()
    proc = subprocess.Popen([os.path.join(bin_dir, "tessera-localai"), f"--addr=127.0.0.1:{port}",
                             "--kv-cache-mb", "256", *extra_args], env=env,
                            stdout=subprocess.DEVNULL, stderr=sys.stderr)
    return proc, f"127.0.0.1:{port}"


def proc_stat(pid):
    """(state, ppid, comm) of `pid` from /proc, or None when it is gone (reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    comm = stat[stat.index("(") + 1:stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), comm


def worker_pids(parent):
    """The tessera-worker children of `parent`, zombies included (a zombie is not reaped yet)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = proc_stat(int(entry))
            if stat is not None and stat[1] == parent and stat[2].startswith("tessera-worke"):
                pids.append(int(entry))
    return sorted(pids)


def the_worker(parent):
    pids = worker_pids(parent)
    check(len(pids) == 1, f"expected one tessera-worker child, found {pids}")
    return pids[0]


def resident_bytes(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def listening_ports(pid):
    """TCP ports `pid` listens on: its socket inodes matched against /proc/net/tcp{,6}."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # 0A = LISTEN
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return sorted(ports)


def predict_works(stub, pb2, tokens=2):
    reply = stub.Predict(pb2.PredictOptions(Prompt="Hello", Tokens=tokens, Temperature=0,
                                            IgnoreEOS=True), timeout=60)
    check(reply.tokens == tokens, reply)


class BackgroundStream:
    """A long PredictStream on its own thread: `first` once a token came, `done` when it ended."""

    def __init__(self, grpc, stub, pb2):
        self.first, self.done = threading.Event(), threading.Event()
        self.code, self.details = None, ""
        self._grpc = grpc
        options = pb2.PredictOptions(Prompt="Once upon a time", Tokens=1900, Temperature=0,
                                     IgnoreEOS=True)
        threading.Thread(target=self._run, args=(stub, options), daemon=True).start()
        check(self.first.wait(60), "the stream produced no token within 60 s")

    def _run(self, stub, options):
        try:
            for reply in stub.PredictStream(options, timeout=120):
                if reply.tokens > 0:
                    self.first.set()
            self.code = self._grpc.StatusCode.OK
        except self._grpc.RpcError as error:
            self.code, self.details = error.code(), error.details()
        finally:
            self.first.set()
            self.done.set()

    def assert_cancelled(self, grpc, why, within_s):
        check(self.done.wait(within_s), f"the stream still runs {within_s} s after {why}")
        check(self.code == grpc.StatusCode.CANCELLED, (self.code, self.details))
        check(why in self.details, self.details)


def wait_health(grpc, stub, pb2, metadata=None):
    """Polls Health as LocalAI does until it answers "OK"."""
    for _ in range(300):
        try:
            reply = stub.Health(pb2.HealthMessage(), timeout=2, metadata=metadata)
            check(reply.message == b"OK", reply)
            return
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            time.sleep(0.1)
    raise AssertionError("Health never answered")


def stream(stub, pb2, **fields):
    replies = list(stub.PredictStream(pb2.PredictOptions(**fields), timeout=120))
    return b"".join(r.message for r in replies).decode(), replies


def check_predict(stub, pb2):
    prompt = "The capital of France is"
    fields = dict(Prompt=prompt, Tokens=8, Temperature=0, IgnoreEOS=True, Seed=1)
    text, replies = stream(stub, pb2, **fields)
    whole = stub.Predict(pb2.PredictOptions(**fields), timeout=120)
    check(whole.message.decode() == text, (whole.message, text))
    check(whole.tokens == replies[-1].tokens == 8, (whole.tokens, replies[-1].tokens))
    counts = [r.tokens for r in replies]
    check(counts == sorted(counts), counts)
    prompt_ids = stub.TokenizeString(pb2.PredictOptions(Prompt=prompt), timeout=30)
    check(prompt_ids.length == len(prompt_ids.tokens) > 0, prompt_ids)
    check(all(r.prompt_tokens == prompt_ids.length for r in replies), replies[0])
    check(replies[-1].timing_prompt_processing > 0 and replies[-1].timing_token_generation > 0)
    chat, _ = stream(stub, pb2, UseTokenizerTemplate=True, Tokens=24, Temperature=0,
                     Messages=[pb2.Message(role="user", content="What is the capital of France?")])
    check("Paris" in chat, chat)
    stopped, _ = stream(stub, pb2, Prompt=prompt, Tokens=32, Temperature=0, IgnoreEOS=True,
                        StopPrompts=[text[3:6]])
    check(stopped == text[:text.find(text[3:6])], (stopped, text))
    # LocalAI's Grammar (GBNF): the output is a sentence of it.
    grammar = 'root ::= "The answer is " ("yes" | "no") "."'
    guided = stub.Predict(pb2.PredictOptions(Prompt="Is water wet?", Tokens=24, Temperature=1.0,
                                             Seed=3, Grammar=grammar), timeout=120)
    check(guided.message.decode() in ("The answer is yes.", "The answer is no."), guided.message)
    print(f"predict OK: {text!r}; chat {chat!r}; grammar {guided.message.decode()!r}")


def check_concurrent(stub, pb2):
    """Four streams at once: every stream's first token comes before any stream's last."""
    spans, errors = [None] * 4, []

    def run(i):
        try:
            first = last = None
            for reply in stub.PredictStream(pb2.PredictOptions(
                    Prompt=f"Story number {i}:", Tokens=24, Temperature=0, IgnoreEOS=True),
                    timeout=180):
                now = time.monotonic()
                if reply.tokens > 0 and first is None:
                    first = now
                last = now
            spans[i] = (first, last)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    busy = False
    while any(t.is_alive() for t in threads):
        busy |= stub.Status(pb2.HealthMessage(), timeout=5).state == pb2.StatusResponse.BUSY
        time.sleep(0.02)
    for t in threads:
        t.join()
    check(not errors, errors)
    check(busy, "Status never said BUSY during four streams")
    check(max(s[0] for s in spans) < min(s[1] for s in spans), f"serialized: {spans}")
    print("concurrent OK (streams overlapped)")


def check_worker_secret(grpc, backend_pid):
    """The started worker answers only its backend: no secret or a guessed one is refused."""
    worker = the_worker(backend_pid)
    ports = listening_ports(worker)
    check(ports, f"tessera-worker {worker} listens on no TCP port")
    identity = dict(request_serializer=lambda b: b, response_deserializer=lambda b: b)
    for port in ports:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        describe = channel.unary_unary("/tessera.worker.v1.Worker/Describe", **identity)
        run = channel.stream_stream("/tessera.worker.v1.Worker/Run", **identity)
        for metadata in (None, [("authorization", "Bearer guess")]):
            try:
                describe(b"", timeout=5, metadata=metadata)
                raise AssertionError(f"the worker's Describe answered with metadata {metadata}")
            except grpc.RpcError as error:
                check(error.code() == grpc.StatusCode.UNAUTHENTICATED, error)
            try:
                list(run(iter(()), timeout=5, metadata=metadata))
                raise AssertionError(f"the worker's Run answered with metadata {metadata}")
            except grpc.RpcError as error:
                check(error.code() == grpc.StatusCode.UNAUTHENTICATED, error)
        channel.close()
    print(f"worker secret OK (port {ports} refuses callers without it)")


def check_failed_loads_keep_model(stub, pb2, backend_pid, tmp):
    worker = the_worker(backend_pid)
    junk = os.path.join(tmp, "junk.gguf")
    with open(junk, "wb") as f:
        f.write(b"TOPSECRET bytes that are no model\n")
    cases = [pb2.ModelOptions(), pb2.ModelOptions(ModelFile="/nonexistent/x.gguf"),
             pb2.ModelOptions(ModelFile="/etc/passwd"), pb2.ModelOptions(ModelFile=junk),
             pb2.ModelOptions(ModelFile=tmp), pb2.ModelOptions(Model=".", ModelPath=tmp)]
    for options in cases:
        result = stub.LoadModel(options, timeout=60)
        check(not result.success, (options, result))
        check(result.message, options)
        check("root" not in result.message and "TOPSECRET" not in result.message, result.message)
        if options.ModelFile in ("/etc/passwd", junk):
            check("not a GGUF" in result.message, result.message)
        check(worker_pids(backend_pid) == [worker], (options, worker_pids(backend_pid)))
        predict_works(stub, pb2)
    print("failed LoadModel calls OK (the old model kept serving)")


def check_respelled_paths(stub, pb2, backend_pid, model, tmp):
    worker = the_worker(backend_pid)
    link = os.path.join(tmp, "link.gguf")
    os.symlink(model, link)
    directory, base = os.path.split(model)
    spellings = [pb2.ModelOptions(ModelFile=f"{directory}/./{base}"),
                 pb2.ModelOptions(ModelFile="/" + model),
                 pb2.ModelOptions(ModelFile=f"{directory}/../{os.path.basename(directory)}/{base}"),
                 pb2.ModelOptions(ModelFile=link),
                 pb2.ModelOptions(Model="./" + base, ModelPath=directory + "//")]
    for options in spellings:
        result = stub.LoadModel(options, timeout=60)
        check(result.success and "already loaded" in result.message, (options, result))
        check(worker_pids(backend_pid) == [worker], (options, worker_pids(backend_pid)))
    predict_works(stub, pb2)
    print("respelled paths OK (no second worker)")


def check_reload_during_stream(grpc, stub, pb2, backend_pid, other_model):
    old = the_worker(backend_pid)
    stream = BackgroundStream(grpc, stub, pb2)
    result = stub.LoadModel(pb2.ModelOptions(ModelFile=other_model, ContextSize=2048, Threads=2),
                            timeout=300)
    check(result.success, result.message)
    stream.assert_cancelled(grpc, "replaced", within_s=15)
    new = the_worker(backend_pid)
    check(new != old and proc_stat(old) is None, f"old worker {old} is still there: {new}")
    status = stub.Status(pb2.HealthMessage(), timeout=5)
    reported, live = status.memory.breakdown["tessera-worker"], resident_bytes(new)
    check(abs(reported - live) <= 0.25 * live, (reported, live))
    predict_works(stub, pb2)
    print("reload during a stream OK (stream cancelled, one worker left)")


def check_free_during_stream(grpc, stub, pb2, backend_pid):
    worker = the_worker(backend_pid)
    stream = BackgroundStream(grpc, stub, pb2)
    result = stub.Free(pb2.HealthMessage(), timeout=60)
    check(result.success, result.message)
    stream.assert_cancelled(grpc, "Free", within_s=15)
    check(worker_pids(backend_pid) == [] and proc_stat(worker) is None, worker_pids(backend_pid))
    print("Free during a stream OK (stream cancelled, worker reaped)")


def start_worker(bin_dir, model):
    """A tessera-worker without a secret, as an operator would run one for --worker."""
    env = dict(os.environ)
    env.pop("TESSERA_WORKER_SECRET", None)
    worker = subprocess.Popen([os.path.join(bin_dir, "tessera-worker"), "--model", model,
                               "--listen", "127.0.0.1:0", "--kv-cache-mb", "256"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in worker.stdout],
                     daemon=True).start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            continue
        if "tessera-worker listening on" in line:
            return worker, line.split()[-1]
    worker.kill()
    raise AssertionError("tessera-worker did not start within 120 s")


def check_attach_needs_accepted_stream(grpc, pb2, pb2_grpc, bin_dir, model):
    """Someone else holds the worker's Run stream: LoadModel must not claim the model."""
    worker, worker_addr = start_worker(bin_dir, model)
    proc = None
    release = threading.Event()

    def held_plans():
        release.wait(120)
        yield from ()

    try:
        channel = grpc.insecure_channel(worker_addr)
        hijack = channel.stream_stream("/tessera.worker.v1.Worker/Run",
                                       request_serializer=lambda b: b,
                                       response_deserializer=lambda b: b)(held_plans(), timeout=120)
        time.sleep(1.0)  # the worker has taken the first Run stream: ours
        proc, addr = spawn(bin_dir, extra_args=["--worker", worker_addr, "--load-timeout-s", "5"])
        stub = pb2_grpc.BackendStub(grpc.insecure_channel(addr))
        wait_health(grpc, stub, pb2)
        result = stub.LoadModel(pb2.ModelOptions(ModelFile=model), timeout=60)
        check(not result.success, f"LoadModel claimed a worker serving another client: {result}")
        release.set()
        try:
            list(hijack)
        except grpc.RpcError:
            pass
        result = stub.LoadModel(pb2.ModelOptions(ModelFile=model), timeout=60)
        check(result.success, result.message)
        predict_works(stub, pb2)
    finally:
        release.set()
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=60)
        worker.terminate()
        worker.wait(timeout=60)
    print("attached worker OK (a stream held by another client is not a loaded model)")


def check_two_workers(grpc, pb2, pb2_grpc, bin_dir, model):
    """--workers 2: two tessera-worker children behind one model; concurrent Predicts finish;
    with one of them killed the model keeps serving on the other."""
    bad = subprocess.run([os.path.join(bin_dir, "tessera-localai"), "--addr=127.0.0.1:0",
                          "--workers", "2", "--worker", "127.0.0.1:1"],
                         capture_output=True, text=True, timeout=30)
    check(bad.returncode != 0 and bad.stderr.count("\n") == 1, bad.stderr)
    check("--workers starts workers; --worker attaches to one" in bad.stderr, bad.stderr)
    proc, addr = spawn(bin_dir, extra_args=("--workers", "2"))
    try:
        stub = pb2_grpc.BackendStub(grpc.insecure_channel(addr))
        wait_health(grpc, stub, pb2)
        result = stub.LoadModel(pb2.ModelOptions(
            Model=os.path.basename(model), ModelPath=os.path.dirname(model), Threads=1),
            timeout=300)
        check(result.success, result.message)
        workers = worker_pids(proc.pid)
        check(len(workers) == 2, f"expected two tessera-worker children, found {workers}")
        check(listening_ports(workers[0]) != listening_ports(workers[1]))
        status = stub.Status(pb2.HealthMessage(), timeout=5)
        check(status.memory.breakdown["tessera-worker"] > resident_bytes(workers[0]), status)
        replies = [None] * 4
        threads = [threading.Thread(target=lambda i=i: replies.__setitem__(
            i, stub.Predict(pb2.PredictOptions(Prompt=f"Story {i}:", Tokens=6, Temperature=0,
                                               IgnoreEOS=True), timeout=120)))
                   for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        check(all(r is not None and r.tokens == 6 for r in replies), replies)
        os.kill(workers[0], signal.SIGKILL)
        deadline = time.monotonic() + 10
        while True:  # the router sees the lost stream within moments; then the other serves
            try:
                predict_works(stub, pb2)
                break
            except grpc.RpcError as error:
                check(time.monotonic() < deadline, f"the other worker did not serve: {error}")
                time.sleep(0.1)
        for _ in range(4):
            predict_works(stub, pb2)
    finally:
        proc.terminate()
        code = proc.wait(timeout=60)
    check(code == 0, f"tessera-localai --workers 2 exited with {code}")
    print("two workers OK")


def check_auth(grpc, pb2, pb2_grpc, bin_dir):
    proc, addr = spawn(bin_dir, token="s3cret")
    try:
        stub = pb2_grpc.BackendStub(grpc.insecure_channel(addr))
        wait_health(grpc, stub, pb2, metadata=[("authorization", "Bearer s3cret")])
        for metadata in (None, [("authorization", "Bearer wrong")]):
            try:
                stub.Health(pb2.HealthMessage(), timeout=5, metadata=metadata)
                raise AssertionError(f"Health answered with metadata {metadata}")
            except grpc.RpcError as error:
                check(error.code() == grpc.StatusCode.UNAUTHENTICATED, error)
        try:
            stub.LoadModel(pb2.ModelOptions(Model="x"), timeout=5)
            raise AssertionError("LoadModel answered without a token")
        except grpc.RpcError as error:
            check(error.code() == grpc.StatusCode.UNAUTHENTICATED, error)
    finally:
        proc.terminate()
        check(proc.wait(timeout=30) == 0)
    print("auth OK")


def main():
    args = parse_e2e_args()
    import grpc  # Debian python3-grpcio

    with tempfile.TemporaryDirectory() as stubs_dir:
        pb2, pb2_grpc = generate_stubs(args.repo, stubs_dir)
        check_wire_facts(pb2)
        proc, addr = spawn(args.bin_dir)
        try:
            stub = pb2_grpc.BackendStub(grpc.insecure_channel(addr))
            wait_health(grpc, stub, pb2)
            status = stub.Status(pb2.HealthMessage(), timeout=5)
            check(status.state == pb2.StatusResponse.UNINITIALIZED, status)
            check_before_load(grpc, stub, pb2)
            model = os.path.abspath(args.model)
            result = stub.LoadModel(pb2.ModelOptions(
                Model=os.path.basename(model), ModelPath=os.path.dirname(model),
                ContextSize=2048, Threads=2), timeout=300)
            check(result.success, result.message)
            status = stub.Status(pb2.HealthMessage(), timeout=5)
            check(status.state == pb2.StatusResponse.READY, status)
            check(status.memory.total > 0 and "tessera-worker" in status.memory.breakdown, status)
            check_metrics(stub, pb2)  # first: it counts from LoadModel
            check_model_metadata(stub, pb2)
            check_logprobs(grpc, stub, pb2)
            check_predict(stub, pb2)
            check_concurrent(stub, pb2)
            try:
                stub.Embedding(pb2.PredictOptions(Prompt="x"), timeout=5)
                raise AssertionError("Embedding answered")
            except grpc.RpcError as error:
                check(error.code() == grpc.StatusCode.UNIMPLEMENTED, error)
            check_undeclared_rpcs(grpc, grpc.insecure_channel(addr))
            predict_works(stub, pb2)
            check_worker_secret(grpc, proc.pid)
            check_failed_loads_keep_model(stub, pb2, proc.pid, stubs_dir)
            check_respelled_paths(stub, pb2, proc.pid, model, stubs_dir)
            other_model = os.path.join(stubs_dir, "other.gguf")  # another file: another model
            shutil.copyfile(model, other_model)
            check_reload_during_stream(grpc, stub, pb2, proc.pid, other_model)
            check_free_during_stream(grpc, stub, pb2, proc.pid)
            status = stub.Status(pb2.HealthMessage(), timeout=5)
            check(status.state == pb2.StatusResponse.UNINITIALIZED, status)
        finally:
            proc.terminate()
            code = proc.wait(timeout=60)
        check(code == 0, f"tessera-localai exited with {code}")
        check_two_workers(grpc, pb2, pb2_grpc, args.bin_dir, os.path.abspath(args.model))
        check_auth(grpc, pb2, pb2_grpc, args.bin_dir)
        check_attach_needs_accepted_stream(grpc, pb2, pb2_grpc, args.bin_dir,
                                           os.path.abspath(args.model))
    print("localai backend OK")


if __name__ == "__main__":
    main()
