#!/usr/bin/env python3
"""Links a product of a SwiftPM build once more with the static Swift runtime.

scripts/build-release.sh --with-tests compiles everything once with testing enabled and the
runtime linked dynamically (the static runtime has no Swift Testing module, and SwiftPM puts
--static-swift-stdlib on every compilation). What ships must carry the runtime, so this reads
the link command SwiftPM ran for PRODUCT from its build description (BUILD.yaml), adds
-static-stdlib and writes OUTPUT: the same objects, no second compilation.

usage: relink-static.py BUILD.yaml PRODUCT OUTPUT
"""
import json
import os
import re
import subprocess
import sys


def link_command(description: str, product: str) -> list[str]:
    wanted = None
    with open(description) as f:
        lines = f.readlines()
    # "C.capfleet-x86_64-unknown-linux-gnu-release.exe": the product, then the triple.
    key = re.compile(r'^"C\.' + re.escape(product) + r'-[a-z0-9_]+-[a-z]+-linux-gnu-[a-z]+\.exe":$')
    for index, line in enumerate(lines):
        if key.match(line.strip()):
            wanted = index
            break
    if wanted is None:
        sys.exit(f"relink-static: no link command for {product} in {description}: build it first")
    for line in lines[wanted + 1:wanted + 12]:
        stripped = line.strip()
        if stripped.startswith("args: "):
            return json.loads(stripped[len("args: "):])
    sys.exit(f"relink-static: the link command for {product} in {description} has no args")


def main() -> None:
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    description, product, output = sys.argv[1:]
    args = link_command(description, product)
    out = args.index("-o")
    args[out + 1] = os.path.abspath(output)
    if "-static-stdlib" not in args:
        args.insert(out + 2, "-static-stdlib")
    # Objects compiled against the dynamic runtime name the Foundation libraries they import,
    # not what those need in turn (a shared library brings its own): name them here, as the
    # static runtime's Foundation links them.
    # ICU last: Foundation's internationalisation and CoreFoundation both call into it.
    args += ["-lFoundationInternationalization", "-lFoundationEssentials", "-lCoreFoundation", "-l_FoundationCShims",
             "-l_FoundationCollections", "-lswiftSynchronization", "-l_FoundationICU", "-lstdc++"]
    # The dynamic link's rpath to the toolchain's runtime has nothing to find in a static binary.
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    subprocess.run(args, check=True)
    ldd = subprocess.run(["ldd", output], capture_output=True, text=True).stdout
    if "libswiftCore" in ldd:
        sys.exit(f"relink-static: {output} still links the Swift runtime dynamically:\n{ldd}")
    print(f"relink-static: {output}")


main()
