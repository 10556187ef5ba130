"""frontends/kserve_grpc/wire.py: the native raw-input split agrees with protobuf's parser.

Runs in a subprocess (tritium's generated protobuf modules stay out of the test
process, which other suites share with tritonclient's; see test_proto.py): it
builds ModelInferRequest messages with protobuf (raw inputs, every other kind
of field, unknown fields of each wire type) and broken ones, and checks that
the split returns the fields and views protobuf would, or a clear error.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

CHECK = textwrap.dedent(
    r"""
    import json, sys
    from tritium.core.errors import TritonError
    from tritium.frontends.kserve_grpc import load_native_transport, wire
    from tritium.proto import grpc_service_pb2 as pb

    if load_native_transport()[0] is None:
        print(json.dumps({"skip": load_native_transport()[1]}))
        sys.exit(0)
    from tritium.frontends.kserve_grpc import _native

    def request(n_raw, size):
        r = pb.ModelInferRequest(model_name="m", model_version="1", id="x" * 300)
        r.parameters["priority"].int64_param = 7
        r.parameters["f"].double_param = 0.5
        for i in range(n_raw):
            r.inputs.add(name=f"IN{i}", datatype="UINT8", shape=[size])
            r.raw_input_contents.append(bytes([i % 256]) * size)
        r.outputs.add(name="OUT")
        return r.SerializeToString()

    # unknown fields: varint (field 20), fixed64 (21), fixed32 (22), length-delimited (23) between raw inputs
    unknown = b"\xa0\x01\x96\x01" + b"\xa9\x01" + bytes(8) + b"\xb5\x01" + bytes(4) + b"\xba\x01\x03abc"
    good = [
        b"", request(0, 0), request(1, 0), request(3, 10), request(2, 300_000),
        request(2, 10) + unknown + request(1, 5),
        memoryview(request(2, 100)),
    ]
    bad = [
        b"\x3a",                               # raw input: no length
        b"\x3a\xff\xff\xff\xff\x0f" + bytes(10),  # raw input claiming 4 GiB
        b"\x3a\x05ab",                         # raw input past the end
        b"\x0b",                               # wire type 3 (start group)
        b"\x0c",                               # wire type 4
        b"\x0e",                               # wire type 6
        b"\xa9\x01" + bytes(3),                # fixed64 past the end
        b"\xb5\x01" + bytes(2),                # fixed32 past the end
        b"\x80" * 11,                          # a varint of more than 64 bits
        b"\x08\x80",                           # truncated varint value
    ]
    results = []
    for data in good:
        rest, raws = wire.split_raw_inputs(data)
        assert type(rest) is bytes and all(type(v) is memoryview for v in raws)
        whole = pb.ModelInferRequest.FromString(bytes(data))
        without = pb.ModelInferRequest.FromString(rest)
        del whole.raw_input_contents[:]
        results.append([not without.raw_input_contents, without == whole,
                        pb.ModelInferRequest.FromString(bytes(data)).raw_input_contents[:] == [bytes(b) for b in raws]])
    errors = []
    for data in bad:
        got = []
        for split in (wire.split_raw_inputs,):
            try:
                split(data)
                got.append(None)
            except TritonError as exc:
                got.append([exc.code.name, exc.message])
        errors.append(got)
    print(json.dumps({"results": results, "errors": errors}))
    """
)


def test_native_split_agrees_with_protobuf() -> None:
    import json

    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    if "skip" in report:
        pytest.skip(f"the native transport is not built: {report['skip']}")
    assert report["results"] == [[True, True, True]] * 7
    expected = [
        "truncated varint",
        "field runs past the end",
        "field runs past the end",
        "wire type 3",
        "wire type 4",
        "wire type 6",
        "field runs past the end",
        "field runs past the end",
        "truncated varint",
        "truncated varint",
    ]
    assert report["errors"] == [[["INVALID_ARG", f"malformed ModelInferRequest: {m}"]] for m in expected]
