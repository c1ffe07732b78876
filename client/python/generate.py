"""Streams a completion from a linserve server's Generate RPC.

The gRPC code comes from proto/ (Debian 12: python3-grpcio, python3-protobuf,
protobuf-compiler-grpc); from the repository root:

    mkdir -p /tmp/pygen
    protoc -I proto --python_out=/tmp/pygen --grpc_python_out=/tmp/pygen \
        --plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin \
        proto/linserve/v1/linserve.proto

Then:

    PYTHONPATH=/tmp/pygen /usr/bin/python3 client/python/generate.py \
        --server=localhost:50051 --max_new_tokens=100 --seed=1 "ROMEO:"

The text goes to stdout as it is sampled; the finish reason, usage and timing
go to stderr.
"""

import argparse
import sys

import grpc

from linserve.v1 import linserve_pb2, linserve_pb2_grpc


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prompt", nargs="?", default="-",
                        help='the prompt; "-" or absent reads it from stdin')
    parser.add_argument("--server", default="localhost:50051", help="host:port")
    parser.add_argument("--max_new_tokens", type=int, default=0,
                        help="0 takes the server's default")
    parser.add_argument("--temperature", type=float,
                        help="0 is greedy; unset takes the server's default (1.0)")
    parser.add_argument("--seed", type=int,
                        help="same seed, same text (0 is a seed like any other); unset, "
                             "the server picks a random one and reports it")
    parser.add_argument("--session", default="",
                        help="continue this session instead of a stateless request")
    return parser.parse_args()


def main():
    args = parse_args()
    prompt = sys.stdin.buffer.read() if args.prompt == "-" else args.prompt.encode()

    sampling = linserve_pb2.SamplingParams()
    # seed and temperature are `optional` in the proto: a field left unset,
    # rather than sent as 0, lets the server pick a seed and keeps its
    # default temperature instead of asking for seed 0 or greedy.
    if args.seed is not None:
        sampling.seed = args.seed
    if args.temperature is not None:
        sampling.temperature = args.temperature
    request = linserve_pb2.GenerateRequest(
        prompt=prompt, session_id=args.session, sampling=sampling,
        max_new_tokens=args.max_new_tokens)

    finished, wrote = None, False
    with grpc.insecure_channel(args.server) as channel:
        stub = linserve_pb2_grpc.LinserveStub(channel)
        try:
            for response in stub.Generate(request):
                # Each piece holds whole UTF-8 sequences, so it decodes alone.
                sys.stdout.write(response.text.decode("utf-8"))
                sys.stdout.flush()
                wrote = wrote or bool(response.text)
                if response.HasField("finished"):
                    finished = response.finished
        except grpc.RpcError as error:
            # A stream can fail midway: end the partial text's line first.
            if wrote:
                print()
            print(f"error: {error.code().name}: {error.details()}", file=sys.stderr)
            return 1

    if wrote:
        print()
    if finished is None:
        print("error: the stream ended without a finished message", file=sys.stderr)
        return 1
    usage, timing = finished.usage, finished.timing
    print(f"finished: {linserve_pb2.FinishReason.Name(finished.reason)}, "
          f"{usage.prompt_tokens} prompt tokens, {usage.generated_tokens} generated, "
          f"seed {finished.seed}, position {finished.position}", file=sys.stderr)
    print(f"timing: queue {timing.queue_ms:.1f} ms, prefill {timing.prefill_ms:.1f} ms, "
          f"decode {timing.decode_ms:.1f} ms", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
