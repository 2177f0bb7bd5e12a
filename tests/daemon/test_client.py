"""ProvingClient against real in-process gRPC servers over TCP and a unix socket."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from pytest_cuzk.core.errors import (
    DaemonExited,
    DaemonUnavailable,
    DeadlineExceeded,
    InternalError,
    InvalidArgument,
    NotCuzkServer,
    NotFound,
    ProofFailed,
    ProofTimeout,
    ResourceExhausted,
    RpcError,
    Unimplemented,
)
from pytest_cuzk.daemon.client import (
    AWAIT_MARGIN_S,
    DEFAULT_MAX_MESSAGE_BYTES,
    ProofResult,
    ProvingClient,
    parse_metrics,
)
from pytest_cuzk.daemon.errormap import ERROR_CLASSES
from pytest_cuzk.proto import pb, pb_grpc
from pytest_cuzk.vocab.addresses import Address, parse_address

MiB = 1024 * 1024
HANG_S = 10.0  # how long "sleep-*" jobs block unless the server shuts down first
SERVER_OPTIONS = [
    ("grpc.max_send_message_length", DEFAULT_MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", DEFAULT_MAX_MESSAGE_BYTES),
]
METRICS_TEXT = """\
# HELP cuzk_proofs_completed_total Total proofs completed
# TYPE cuzk_proofs_completed_total counter
cuzk_proofs_completed_total 3
# HELP cuzk_uptime_seconds Daemon uptime
# TYPE cuzk_uptime_seconds gauge
cuzk_uptime_seconds 42
# HELP cuzk_proofs_completed Proofs completed by kind
# TYPE cuzk_proofs_completed counter
cuzk_proofs_completed{proof_kind="porep_c2"} 2
cuzk_proofs_completed{proof_kind="winning_post"} 1
# HELP cuzk_proof_duration_seconds Proof duration (last 1000)
# TYPE cuzk_proof_duration_seconds summary
cuzk_proof_duration_seconds_count{proof_kind="porep_c2"} 2
cuzk_proof_duration_seconds_sum{proof_kind="porep_c2"} 123.456
"""


class FakeEngine(pb_grpc.ProvingEngineServicer):
    """Behaves like cuzk where it matters to a client; job ids choose the behaviour.

    ``sleep-*`` blocks (ignoring timeout_ms, as cuzk does), ``fail-*`` ends FAILED, ``timeout-*`` answers
    status TIMEOUT, unknown ids are NOT_FOUND, and PreloadSRS of ``abort:<CODE>`` aborts with that code.
    """

    def __init__(self) -> None:
        self.jobs: dict[str, pb.SubmitProofRequest] = {}
        self.await_timeouts: dict[str, int] = {}
        self.loaded: set[str] = set()
        self.stopping = threading.Event()

    def SubmitProof(
        self, request: pb.SubmitProofRequest, context: grpc.ServicerContext
    ) -> pb.SubmitProofResponse:
        if request.proof_kind not in (1, 2, 3, 4):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"invalid proof_kind: {request.proof_kind}")
        job_id = request.request_id or f"uuid-{len(self.jobs)}"
        self.jobs[job_id] = request
        return pb.SubmitProofResponse(job_id=job_id, queue_position=len(self.jobs) - 1)

    def AwaitProof(
        self, request: pb.AwaitProofRequest, context: grpc.ServicerContext
    ) -> pb.AwaitProofResponse:
        self.await_timeouts[request.job_id] = request.timeout_ms
        if request.job_id not in self.jobs:
            context.abort(grpc.StatusCode.NOT_FOUND, f"job not found: {request.job_id}")
        return self._finish(request.job_id, self.jobs[request.job_id])

    def Prove(self, request: pb.ProveRequest, context: grpc.ServicerContext) -> pb.ProveResponse:
        result = self._finish(request.submit.request_id, request.submit)
        result.job_id = request.submit.request_id  # "" when the caller gave none, as cuzk does
        return pb.ProveResponse(result=result)

    def _finish(self, job_id: str, request: pb.SubmitProofRequest) -> pb.AwaitProofResponse:
        if job_id.startswith("sleep"):
            self.stopping.wait(HANG_S)
        if job_id.startswith("fail"):
            return pb.AwaitProofResponse(
                job_id=job_id,
                status=2,
                error_message="C1 parse failed: failed to parse C1 output wrapper JSON",
            )
        if job_id.startswith("timeout"):
            return pb.AwaitProofResponse(job_id=job_id, status=pb.AwaitProofResponse.TIMEOUT)
        return pb.AwaitProofResponse(
            job_id=job_id,
            status=pb.AwaitProofResponse.COMPLETED,
            proof=request.vanilla_proof or b"\x01" * 192,
            queue_wait_ms=1,
            srs_load_ms=2,
            synthesis_ms=3,
            gpu_compute_ms=4,
            total_ms=10,
        )

    def CancelProof(
        self, request: pb.CancelProofRequest, context: grpc.ServicerContext
    ) -> pb.CancelProofResponse:
        if request.job_id.startswith("sleep"):
            self.stopping.wait(HANG_S)
        return pb.CancelProofResponse(was_running=request.job_id in self.jobs)

    def GetStatus(self, request: pb.GetStatusRequest, context: grpc.ServicerContext) -> pb.GetStatusResponse:
        return pb.GetStatusResponse(
            gpus=[pb.GPUStatus(ordinal=0, name="GPU 0", current_proof_kind="porep-c2")],
            loaded_srs=[pb.SRSStatus(circuit_id=c) for c in sorted(self.loaded)],
            queues=[pb.QueueStatus(proof_kind="porep-c2", pending=1, in_progress=2)],
            total_proofs_completed=len(self.jobs),
            uptime_seconds=42,
        )

    def GetMetrics(
        self, request: pb.GetMetricsRequest, context: grpc.ServicerContext
    ) -> pb.GetMetricsResponse:
        return pb.GetMetricsResponse(prometheus_text=METRICS_TEXT)

    def PreloadSRS(
        self, request: pb.PreloadSrsRequest, context: grpc.ServicerContext
    ) -> pb.PreloadSrsResponse:
        if request.circuit_id.startswith("abort:"):
            code = grpc.StatusCode[request.circuit_id.removeprefix("abort:")]
            context.abort(code, f"aborted with {code.name}")
        if not request.circuit_id.endswith("-32g"):
            context.abort(grpc.StatusCode.INTERNAL, f"unknown circuit ID: {request.circuit_id}")
        already = request.circuit_id in self.loaded
        self.loaded.add(request.circuit_id)
        return pb.PreloadSrsResponse(already_loaded=already, load_time_ms=0 if already else 1234)

    def EvictSRS(self, request: pb.EvictSrsRequest, context: grpc.ServicerContext) -> pb.EvictSrsResponse:
        was = request.circuit_id in self.loaded
        self.loaded.discard(request.circuit_id)
        return pb.EvictSrsResponse(was_loaded=was, freed_bytes=4096 if was else 0)


def start_server(servicer: pb_grpc.ProvingEngineServicer, *listen: str) -> tuple[grpc.Server, int]:
    """Serve on every listen address; returns the server and the port bound for the first."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=SERVER_OPTIONS)
    pb_grpc.add_ProvingEngineServicer_to_server(servicer, server)
    ports = [server.add_insecure_port(addr) for addr in listen]
    server.start()
    return server, ports[0]


@pytest.fixture(scope="module")
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture(scope="module")
def addresses(engine: FakeEngine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    sock = tmp_path_factory.mktemp("sock") / "cuzk.sock"
    server, port = start_server(engine, "127.0.0.1:0", f"unix://{sock}")
    yield {"tcp": f"127.0.0.1:{port}", "unix": f"unix://{sock}"}
    engine.stopping.set()
    server.stop(grace=None)


@pytest.fixture(params=["tcp", "unix"])
def client(request: pytest.FixtureRequest, addresses: dict[str, str]) -> Iterator[ProvingClient]:
    with ProvingClient(addresses[request.param], default_timeout=10.0) as c:
        yield c


def porep_request(request_id: str, vanilla: bytes = b"{}") -> pb.SubmitProofRequest:
    return pb.SubmitProofRequest(
        request_id=request_id, proof_kind=pb.POREP_SEAL_COMMIT, vanilla_proof=vanilla, miner_id=1000
    )


def free_tcp_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


# --- addresses


@pytest.mark.parametrize(
    ("addr", "target", "display"),
    [
        ("127.0.0.1:9820", "127.0.0.1:9820", "127.0.0.1:9820"),
        ("0.0.0.0:9820", "0.0.0.0:9820", "0.0.0.0:9820"),
        ("localhost:9820", "localhost:9820", "localhost:9820"),
        ("prover-7.example:9820", "prover-7.example:9820", "prover-7.example:9820"),
        ("[::1]:9820", "[::1]:9820", "[::1]:9820"),
        ("http://127.0.0.1:9820", "127.0.0.1:9820", "127.0.0.1:9820"),
        ("http://localhost:9820/", "localhost:9820", "localhost:9820"),
        ("http://[::1]:9820", "[::1]:9820", "[::1]:9820"),
        ("  127.0.0.1:9820\n", "127.0.0.1:9820", "127.0.0.1:9820"),
        ("unix:///run/curio/cuzk.sock", "unix:/run/curio/cuzk.sock", "unix:///run/curio/cuzk.sock"),
        ("unix:/run/curio/cuzk.sock", "unix:/run/curio/cuzk.sock", "unix:///run/curio/cuzk.sock"),
    ],
)
def test_parse_address_accepts_the_forms_cuzk_tools_use(addr: str, target: str, display: str) -> None:
    assert parse_address(addr) == Address(target, display)


@pytest.mark.parametrize(
    ("addr", "why"),
    [
        ("", "the address is empty"),
        ("https://127.0.0.1:9820", "scheme https:// is not supported"),
        ("dns:///localhost:9820", "scheme dns:// is not supported"),
        ("localhost", "the port is missing"),
        ("http://localhost", "the port is missing"),
        (":9820", "the port is missing"),
        ("127.0.0.1:", "port '' is not a number"),
        ("127.0.0.1:70000", "port '70000' is not a number from 1 to 65535"),
        ("127.0.0.1:0", "port '0' is not a number"),
        ("::1:9820", "put an IPv6 address in brackets"),
        ("[nope]:9820", "'nope' in brackets is not an IPv6 address"),
        ("unix://run/cuzk.sock", "the unix socket path must be absolute"),
        ("unix:cuzk.sock", "the unix socket path must be absolute"),
        ("http://host/x:9820", "takes no path, query or fragment"),
    ],
)
def test_parse_address_rejects_other_forms_listing_the_accepted_ones(addr: str, why: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"cannot use daemon address {addr!r}")) as info:
        parse_address(addr)
    assert why in str(info.value)
    assert "Accepted forms: IP:port, host:port, [IPv6]:port, http://host:port, unix:///absolute/path" in str(
        info.value
    )


@pytest.mark.parametrize(
    ("addr", "shown"),
    [
        ("http://cuzk:s3cret@127.0.0.1:9820", "http://cuzk:***@127.0.0.1:9820"),
        ("cuzk:s3cret@127.0.0.1:9820", "cuzk:***@127.0.0.1:9820"),
        ("s3cret@127.0.0.1:9820", "***@127.0.0.1:9820"),
        ("http://s3cret@127.0.0.1:9820", "http://***@127.0.0.1:9820"),
    ],
)
def test_an_address_with_a_password_is_refused_without_showing_it(addr: str, shown: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_address(addr)
    said = f"cannot use daemon address {shown!r}: a daemon address takes no user name or password"
    assert said in str(info.value) and "s3cret" not in str(info.value), str(info.value)


@pytest.mark.parametrize("addr", ["http://127.0.0.1:9820/?token=s3cret", "127.0.0.1:9820?token=s3cret"])
def test_an_address_with_a_query_is_refused_without_showing_it(addr: str) -> None:
    with pytest.raises(ValueError, match="takes no path, query or fragment") as info:
        parse_address(addr)
    assert "s3cret" not in str(info.value), str(info.value)


def test_client_refuses_a_bad_address_before_connecting() -> None:
    with pytest.raises(ValueError, match="https://"):
        ProvingClient("https://127.0.0.1:9820")


# --- every RPC


def test_submit_then_await_round_trips_fields_and_timings(client: ProvingClient, engine: FakeEngine) -> None:
    request = porep_request(f"porep-1000-{client.target}", vanilla=b'{"c1": 1}')
    submitted = client.submit(request)
    assert submitted.job_id == request.request_id
    assert engine.jobs[request.request_id] == request
    result = client.await_proof(submitted.job_id, timeout_s=5)
    assert (result.job_id, result.status_name, result.completed, result.proof) == (
        request.request_id,
        "COMPLETED",
        True,
        b'{"c1": 1}',
    )
    assert (result.queue_wait_ms, result.srs_load_ms, result.synthesis_ms, result.gpu_compute_ms) == (
        1,
        2,
        3,
        4,
    )
    assert result.total_ms == 10 and 0 < result.rpc_s < 5
    assert result.raw is not None and result.raw.proof == result.proof
    assert result.raise_for_status() is result
    assert engine.await_timeouts[request.request_id] == 5000


def test_submit_without_request_id_gets_the_servers_id(client: ProvingClient) -> None:
    assert client.submit(porep_request("")).job_id.startswith("uuid-")


def test_prove_returns_the_result_and_keeps_cuzks_empty_job_id(client: ProvingClient) -> None:
    result = client.prove(porep_request("", vanilla=b"x" * 10), timeout_s=5)
    assert (result.job_id, result.completed, result.proof) == ("", True, b"x" * 10)
    assert result.address == client.address


def test_failed_job_is_a_result_until_raise_for_status(client: ProvingClient) -> None:
    client.submit(porep_request("fail-1"))
    result = client.await_proof("fail-1", timeout_s=5)
    assert (result.status_name, result.proof) == ("FAILED", b"")
    with pytest.raises(ProofFailed, match=r"'fail-1' on .* ended FAILED: C1 parse failed") as info:
        result.raise_for_status()
    assert info.value.error_message == "C1 parse failed: failed to parse C1 output wrapper JSON"


def test_cancel(client: ProvingClient) -> None:
    client.submit(porep_request("cancel-me"))
    assert client.cancel("cancel-me") is True
    assert client.cancel("never-submitted") is False


def test_status_is_the_raw_message(client: ProvingClient) -> None:
    status = client.status()
    assert isinstance(status, pb.GetStatusResponse)
    assert (status.gpus[0].name, status.queues[0].in_progress, status.uptime_seconds) == ("GPU 0", 2, 42)


def test_metrics_text_and_samples(client: ProvingClient) -> None:
    assert client.metrics() == METRICS_TEXT
    samples = client.metric_samples()
    assert samples.value("cuzk_proofs_completed_total") == 3
    assert samples.value("cuzk_proofs_completed", proof_kind="porep_c2") == 2
    assert samples.value("cuzk_proof_duration_seconds_sum", proof_kind="porep_c2") == 123.456
    assert samples.value("cuzk_proofs_completed", proof_kind="snap_update") is None
    assert samples.value("cuzk_no_such_metric") is None
    sample = samples.by_key[("cuzk_uptime_seconds", ())]
    assert (sample.family, sample.type, sample.value) == ("cuzk_uptime_seconds", "gauge", 42.0)


def test_parse_metrics_keeps_every_sample_with_sorted_labels() -> None:
    samples = parse_metrics('# TYPE m gauge\nm{b="2",a="1"} 5\nm{a="0"} 6\n').samples
    assert [(s.name, s.labels, s.value) for s in samples] == [
        ("m", (("a", "1"), ("b", "2")), 5.0),
        ("m", (("a", "0"),), 6.0),
    ]


def test_preload_and_evict_srs(client: ProvingClient) -> None:
    circuit = f"wpost-{client.target.replace(':', '-')}-32g"
    first = client.preload_srs(circuit, timeout_s=5)
    assert (first.already_loaded, first.load_time_ms) == (False, 1234) and first.rpc_s > 0
    assert client.preload_srs(circuit, timeout_s=5).already_loaded is True
    assert circuit in [s.circuit_id for s in client.status().loaded_srs]
    assert client.evict_srs(circuit).was_loaded is True
    assert client.evict_srs(circuit).freed_bytes == 0


# --- payload size


def test_60_mb_payload_round_trips_both_ways(client: ProvingClient) -> None:
    payload = bytes(range(256)) * (60 * MiB // 256)
    job = f"big-{client.target}"
    client.submit(porep_request(job, vanilla=payload))
    assert client.await_proof(job, timeout_s=30).proof == payload


def test_client_send_limit_is_a_clear_message_too_large(addresses: dict[str, str]) -> None:
    small = ProvingClient(addresses["tcp"], max_message_bytes=4 * MiB)
    with (
        small,
        pytest.raises(
            ResourceExhausted, match=r"SubmitProof on 127\.0\.0\.1:\d+ failed with RESOURCE_EX"
        ) as info,
    ):
        small.submit(porep_request("too-big", vanilla=b"\0" * (5 * MiB)))
    assert "max_message_bytes" in str(info.value)


# --- deadlines and AwaitProof bounds


def test_every_call_has_a_deadline(client: ProvingClient) -> None:
    start = time.monotonic()
    with pytest.raises(DeadlineExceeded, match=r"CancelProof on .* DEADLINE_EXCEEDED"):
        client.cancel("sleep-cancel", timeout=0.2)
    assert time.monotonic() - start < HANG_S / 2


def test_await_proof_is_bounded_by_the_client_when_the_server_ignores_timeout_ms(
    client: ProvingClient, engine: FakeEngine
) -> None:
    client.submit(porep_request("sleep-await"))
    with pytest.raises(ProofTimeout, match=r"'sleep-await' on .* not finished after") as info:
        client.await_proof("sleep-await", timeout_s=0.3)
    assert engine.await_timeouts["sleep-await"] == 300
    assert 0.3 <= info.value.elapsed_s < HANG_S / 2
    assert (info.value.job_id, info.value.timeout_s, info.value.address) == (
        "sleep-await",
        0.3,
        client.address,
    )
    assert isinstance(info.value.__cause__, DeadlineExceeded)


def test_await_proof_status_timeout_is_a_proof_timeout(client: ProvingClient) -> None:
    client.submit(porep_request("timeout-status"))
    with pytest.raises(ProofTimeout, match="'timeout-status'"):
        client.await_proof("timeout-status", timeout_s=2)


def test_prove_is_bounded_too(client: ProvingClient) -> None:
    with pytest.raises(ProofTimeout, match="'sleep-prove'") as info:
        client.prove(porep_request("sleep-prove"), timeout_s=0.3)
    assert info.value.elapsed_s < HANG_S / 2


def test_await_margin_is_small() -> None:
    assert 0 < AWAIT_MARGIN_S <= 1


# --- errors


@pytest.mark.parametrize(
    "code", [c for c in grpc.StatusCode if c != grpc.StatusCode.OK], ids=lambda c: c.name
)
def test_server_status_codes_become_mapped_errors(client: ProvingClient, code: grpc.StatusCode) -> None:
    with pytest.raises(RpcError) as info:
        client.preload_srs(f"abort:{code.name}", timeout_s=5)
    err = info.value
    assert type(err) is ERROR_CLASSES.get(code, RpcError)
    assert (err.address, err.rpc, err.code, err.details) == (
        client.address,
        "PreloadSRS",
        code,
        f"aborted with {code.name}",
    )
    assert isinstance(err.__cause__, grpc.RpcError)


def test_cuzk_error_answers_map_to_named_classes(client: ProvingClient) -> None:
    with pytest.raises(InvalidArgument, match=r"SubmitProof on .* INVALID_ARGUMENT: invalid proof_kind: 0"):
        client.submit(pb.SubmitProofRequest(request_id="no-kind"))
    with pytest.raises(
        NotFound, match=r"AwaitProof on .* NOT_FOUND: job not found: ghost; .* submit it again"
    ):
        client.await_proof("ghost", timeout_s=5)
    with pytest.raises(InternalError, match=r"PreloadSRS on .* INTERNAL: unknown circuit ID: porep-2k"):
        client.preload_srs("porep-2k", timeout_s=5)


def test_a_server_without_the_service_is_unimplemented(tmp_path: Path) -> None:
    server, port = start_server(pb_grpc.ProvingEngineServicer(), "127.0.0.1:0")
    try:
        with (
            ProvingClient(f"127.0.0.1:{port}") as c,
            pytest.raises(Unimplemented, match=r"cuzk\.v1\.ProvingEngine"),
        ):
            c.status()
    finally:
        server.stop(grace=None)


def test_wait_ready_does_not_retry_a_server_that_answers_with_an_error() -> None:
    server, port = start_server(pb_grpc.ProvingEngineServicer(), "127.0.0.1:0")
    start = time.monotonic()
    try:
        not_cuzk = r"answers, but not as a cuzk.v1 gRPC server \(Method not implemented!\)"
        with ProvingClient(f"127.0.0.1:{port}") as c, pytest.raises(NotCuzkServer, match=not_cuzk):
            c.wait_ready(timeout_s=30)
    finally:
        server.stop(grace=None)
    assert time.monotonic() - start < 15


def test_loopback_ignores_http_proxy_settings(
    addresses: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dead_proxy = free_tcp_address()
    for var in ("http_proxy", "https_proxy", "grpc_proxy"):
        monkeypatch.setenv(var, f"http://{dead_proxy}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    with ProvingClient(addresses["tcp"]) as c:
        assert c.status(timeout=5).uptime_seconds == 42


# --- readiness


@pytest.mark.parametrize("transport", ["tcp", "unix"])
def test_wait_ready_waits_for_a_daemon_that_binds_late(transport: str, tmp_path: Path) -> None:
    listen = free_tcp_address() if transport == "tcp" else f"unix://{tmp_path}/late.sock"
    started: list[grpc.Server] = []
    timer = threading.Timer(0.4, lambda: started.append(start_server(FakeEngine(), listen)[0]))
    timer.start()
    try:
        with ProvingClient(listen) as c:
            status = c.wait_ready(timeout_s=10)
        assert started, "wait_ready returned before the server existed"
        assert status.uptime_seconds == 42
    finally:
        timer.join()
        for server in started:
            server.stop(grace=None)


@pytest.mark.parametrize("transport", ["tcp", "unix"])
def test_wait_ready_gives_up_naming_the_address_and_last_error(transport: str, tmp_path: Path) -> None:
    address = free_tcp_address() if transport == "tcp" else f"unix://{tmp_path}/nobody.sock"
    start = time.monotonic()
    with ProvingClient(address) as c, pytest.raises(DaemonUnavailable) as info:
        c.wait_ready(timeout_s=0.6)
    assert time.monotonic() - start < 3
    err = info.value
    assert err.address == address and err.rpc == "GetStatus (wait_ready)"
    assert "no answer within 0.6 s" in str(err) and "last error UNAVAILABLE" in str(err)
    assert isinstance(err.__cause__, DaemonUnavailable)


def test_wait_ready_runs_its_check_before_each_attempt_and_stops_when_it_raises(tmp_path: Path) -> None:
    """The one GetStatus poller: a spawned daemon's wait ticks its line and stops when its process exits."""
    calls: list[float] = []

    def between() -> None:
        calls.append(time.monotonic())
        if len(calls) == 4:
            raise DaemonExited("daemon exited before it answered")

    with ProvingClient(f"unix://{tmp_path}/nobody.sock") as c, pytest.raises(DaemonExited):
        c.wait_ready(timeout_s=30, between=between)
    assert len(calls) == 4 and calls[-1] - calls[0] < 5, "polled with backoff, stopped by the check"


def test_proof_result_names_unknown_status_numbers() -> None:
    raw = pb.AwaitProofResponse(job_id="j", status=9)
    assert ProofResult.from_pb(raw, rpc_s=0.1).status_name == "status 9"
