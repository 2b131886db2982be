"""Python classes for CaptureFleet's wire messages, made from ../*.proto with protoc at start.

    import capfleet_protos
    capfleet_protos.compile()     # then: import common_pb2, control_pb2, frames_pb2, ...
"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

PROTO_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def compile():
    """Generate Python classes from proto-docs/*.proto into a temporary folder on sys.path."""
    out = tempfile.mkdtemp(prefix="capfleet-proto-")
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    protos = sorted(f for f in os.listdir(PROTO_DIR) if f.endswith(".proto"))
    try:
        subprocess.run(["protoc", f"--python_out={out}", f"-I{PROTO_DIR}", *protos],
                       cwd=PROTO_DIR, check=True, capture_output=True, text=True)
    except FileNotFoundError:
        sys.exit("protoc not found: apt install protobuf-compiler")
    except subprocess.CalledProcessError as error:
        sys.exit(f"protoc failed on {PROTO_DIR}: {error.stderr.strip()}")
    sys.path.insert(0, out)
