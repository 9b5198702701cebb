"""The Kubernetes simulator's WebSocket-to-SPDY translation, in pieces: its SPDY client's
header dictionary and blocks (written apart from the product's), and the status it
writes on kubectl's channel 3 for each error-stream message a kubelet may send, as
kube-apiserver's StreamTranslator writes it after client-go's decoder has read it. The
whole path runs with the real kubectl in tests/integration/test_kubectl_exec.py."""

from __future__ import annotations

import json
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.sim.kube.pod_ws import exec_status, tunnelled_protocols
from reconciler.sim.kube.spdy import DICTIONARY, SpdyError, header_block, read_header_block

V4 = "v4.channel.k8s.io"


def test_the_dictionary_is_the_drafts() -> None:
    # zlib names a preset dictionary by its Adler-32; SPDY/3 peers know it as 0xe3c6a7c2.
    assert zlib.adler32(DICTIONARY) == 0xE3C6A7C2
    assert len(DICTIONARY) == 1423


names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=20)


@given(st.dictionaries(names, st.text(max_size=40), max_size=6))
def test_header_blocks_round_trip(headers: dict[str, str]) -> None:
    assert read_header_block(header_block(headers)) == headers


def test_a_header_block_that_does_not_add_up_is_refused() -> None:
    block = header_block({"streamtype": "error"})
    with pytest.raises(SpdyError):
        read_header_block(block + b"\x00")
    with pytest.raises(SpdyError):
        read_header_block(block[:-2])


def test_success_and_silence_are_success() -> None:
    assert exec_status(b'{"metadata":{},"status":"Success"}', V4)["status"] == "Success"
    assert exec_status(b"", V4)["status"] == "Success"


def test_an_exit_code_becomes_the_translators_non_zero_exit() -> None:
    kubelet = {
        "metadata": {},
        "status": "Failure",
        "message": "command terminated with non-zero exit code: exit status 3",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": "3"}]},
    }
    status = exec_status(json.dumps(kubelet).encode(), V4)
    assert status["reason"] == "NonZeroExitCode"
    assert status["details"] == {"causes": [{"reason": "ExitCode", "message": "3"}]}
    assert status["message"] == (
        "command terminated with non-zero exit code: command terminated with exit code 3"
    )


@pytest.mark.parametrize(
    ("message", "words"),
    [
        (b'{"status":"Failure","message":"no SSH server answers"}', "no SSH server answers"),
        (b"not json", "error stream protocol error"),
        (b'{"status":"Failure","reason":"NonZeroExitCode"}', "details must be set"),
        (
            b'{"status":"Failure","reason":"NonZeroExitCode",'
            b'"details":{"causes":[{"type":"ExitCode","message":"3"}]}}',
            "no ExitCode cause given",
        ),
        (
            b'{"status":"Failure","reason":"NonZeroExitCode",'
            b'"details":{"causes":[{"reason":"ExitCode","message":"300"}]}}',
            'invalid exit code value "300"',
        ),
        (b'{"status":"Unknown"}', "unknown error"),
    ],
)
def test_anything_else_is_an_internal_error_with_the_words(message: bytes, words: str) -> None:
    status = exec_status(message, V4)
    assert (status["reason"], status["code"]) == ("InternalError", 500)
    assert status["message"].startswith("Internal error occurred: ")
    assert words in status["message"]


def test_before_v4_the_error_stream_is_plain_text() -> None:
    status = exec_status(b"it broke", "v3.channel.k8s.io")
    assert status["message"] == "Internal error occurred: error executing remote command: it broke"


def test_only_kubernetes_protocols_are_tunnelled() -> None:
    class Headers(dict):  # type: ignore[type-arg]
        def get_all(self, name: str) -> list[str]:
            return [self[name]] if name in self else []

    offered = Headers(
        {"Sec-WebSocket-Protocol": "SPDY/3.1+portforward.k8s.io, SPDY/3.1+evil.example, x"}
    )
    assert tunnelled_protocols(offered) == ["portforward.k8s.io"]
