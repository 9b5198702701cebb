"""The exec protocol beside the framing: the kubelet query the API server sends
(`command`, `input`/`output`/`error`/`tty` as "1"), protocol negotiation (the client's
order), the status on the error stream as a kubelet writes it for v4 and before, and the
resize stream's JSON sizes split across frames."""

from __future__ import annotations

import json

import pytest

from reconciler.core.node import remotecommand as rc


def test_the_api_servers_query_is_read_as_the_kubelet_reads_it():
    request = rc.parse_exec({"command": ["sh", "-c", "a b"], "input": ["1"], "output": ["1"]})
    assert request == rc.ExecRequest(("sh", "-c", "a b"), True, True, False, False)
    assert request.streams() == {"error", "stdin", "stdout"}


def test_a_tty_has_no_separate_stderr_and_a_resize_stream():
    request = rc.parse_exec(
        {"command": ["bash"], "input": ["1"], "output": ["1"], "error": ["1"], "tty": ["1"]}
    )
    assert (request.stderr, request.tty) == (False, True)
    assert request.streams() == {"error", "stdin", "stdout", "resize"}


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ({"output": ["1"]}, "at least one command"),
        ({"command": ["ls"]}, "at least 1 of stdin, stdout, stderr"),
        # kubectl's own spelling reaches the API server, never the kubelet
        ({"command": ["ls"], "stdout": ["true"]}, "at least 1 of stdin"),
    ],
)
def test_requests_a_kubelet_refuses(query, says):
    with pytest.raises(rc.ExecRequestError, match=says):
        rc.parse_exec(query)


def test_the_clients_order_decides_the_protocol():
    assert (
        rc.negotiate(
            ["v5.channel.k8s.io", "v4.channel.k8s.io", "channel.k8s.io"], rc.EXEC_PROTOCOLS
        )
        == "v4.channel.k8s.io"
    )
    assert rc.negotiate(["channel.k8s.io", "v4.channel.k8s.io"], rc.EXEC_PROTOCOLS) == (
        "channel.k8s.io"
    )
    assert rc.negotiate(["v5.channel.k8s.io"], rc.EXEC_PROTOCOLS) is None
    assert rc.negotiate(["portforward.k8s.io"], rc.PORT_FORWARD_PROTOCOLS) == ("portforward.k8s.io")


def test_v4_success_is_the_kubelets_json():
    assert rc.exit_status(rc.V4, ["true"], 0) == b'{"metadata":{},"status":"Success"}'


def test_v4_nonzero_exit_carries_the_code_as_the_exitcode_cause():
    status = json.loads(rc.exit_status(rc.V4, ["sh", "-c", "exit 3"], 3))
    assert status["status"] == "Failure"
    assert status["reason"] == "NonZeroExitCode"
    assert status["details"] == {"causes": [{"reason": "ExitCode", "message": "3"}]}
    assert status["message"] == (
        "command terminated with non-zero exit code: "
        "error executing command [sh -c exit 3], exit code 3"
    )


def test_before_v4_only_a_failure_is_written_as_text():
    assert rc.exit_status("v3.channel.k8s.io", ["true"], 0) == b""
    assert rc.exit_status("channel.k8s.io", ["false"], 1).startswith(
        b"command terminated with non-zero exit code"
    )
    assert rc.internal_error("v2.channel.k8s.io", "no sshd") == (
        b"Internal error occurred: no sshd"
    )


def test_v4_internal_error_is_a_500_status():
    status = json.loads(rc.internal_error(rc.V4, "the pod runs no SSH server"))
    assert (status["status"], status["reason"], status["code"]) == ("Failure", "InternalError", 500)
    assert status["message"] == "Internal error occurred: the pod runs no SSH server"


def test_resize_sizes_are_read_across_frames():
    decoder = rc.ResizeDecoder()
    assert list(decoder.feed(b'{"Width":80,"Hei')) == []
    assert list(decoder.feed(b'ght":24}\n{"Width":100,"Height":30}\n')) == [
        rc.TerminalSize(80, 24),
        rc.TerminalSize(100, 30),
    ]
    assert list(decoder.feed(b'{"Width":"wide"}')) == []
    assert list(decoder.feed(b"[" * 5000)) == []  # garbage is dropped, not kept
    assert list(decoder.feed(b'{"Width":1,"Height":2}')) == [rc.TerminalSize(1, 2)]
