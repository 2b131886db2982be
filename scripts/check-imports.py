#!/usr/bin/env python3
"""Checks that Package.swift lists, for every target, exactly the package modules its Swift
files import: a module imported but not listed builds only by luck (another dependency
brought it in) and hides a layer crossed; one listed but never imported is a dependency
each build pays for.

    scripts/check-imports.py      prints each target's differences; exit 1 if there are any

The layers the project holds (README, "Layers"): only FleetBus imports CZeroMQ; FleetRecording
does not import FleetStore; FleetCore imports no C library.
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMPORT = re.compile(r"^\s*(?:@testable\s+|@_exported\s+|@preconcurrency\s+)*import\s+(?:(?:struct|class|enum|protocol|func|var|typealias)\s+)?([A-Za-z_][A-Za-z0-9_]*)", re.M)

# Layers that must hold whatever Package.swift says.
FORBIDDEN = {
    "CZeroMQ": "only FleetBus speaks to libzmq: use its named socket set-ups (FleetBus/SocketOption.swift)",
}
FORBIDDEN_PAIRS = {
    ("FleetRecording", "FleetStore"): "recordings are indexed behind SegmentIndexing, which the coordinator implements",
    ("FleetCore", "FleetStore"): "FleetCore is pure: no SQLite",
    ("FleetCore", "FleetBus"): "FleetCore is pure: no ZeroMQ",
}


def main() -> int:
    dump = json.loads(subprocess.run(["swift", "package", "dump-package"], cwd=ROOT, check=True, capture_output=True, text=True).stdout)
    targets = {t["name"]: t for t in dump["targets"]}
    # Products of dependencies are modules of the same name (true of every one used here).
    product_modules = set()
    for target in dump["targets"]:
        for dependency in target.get("dependencies", []):
            if "product" in dependency:
                product_modules.add(dependency["product"][0])
    known = set(targets) | product_modules
    problems = []
    for name, target in sorted(targets.items()):
        if target["type"] == "system":
            continue
        folder = target.get("path") or os.path.join("Tests" if target["type"] == "test" else "Sources", name)
        imports = set()
        for directory, _, files in os.walk(os.path.join(ROOT, folder)):
            for file in files:
                if file.endswith(".swift"):
                    with open(os.path.join(directory, file), encoding="utf-8") as handle:
                        imports.update(m for m in IMPORT.findall(handle.read()) if m in known and m != name)
        declared = set()
        for dependency in target.get("dependencies", []):
            for kind in ("byName", "target", "product"):
                if kind in dependency:
                    declared.add(dependency[kind][0])
        missing = sorted(imports - declared)
        unused = sorted(declared - imports)
        if missing:
            problems.append(f"{name}: imports {', '.join(missing)} without listing it in Package.swift")
        if unused:
            problems.append(f"{name}: lists {', '.join(unused)} in Package.swift but never imports it")
        for module, why in FORBIDDEN.items():
            if module in imports and name != "FleetBus" and not name.endswith("Tests"):
                problems.append(f"{name}: imports {module}; {why}")
        for (importer, module), why in FORBIDDEN_PAIRS.items():
            if name == importer and module in imports | declared:
                problems.append(f"{name}: depends on {module}; {why}")
    for problem in problems:
        print(f"imports: {problem}", file=sys.stderr)
    if problems:
        print(f"imports: {len(problems)} difference(s) between Package.swift and the imports", file=sys.stderr)
        return 1
    print(f"imports: Package.swift lists exactly what each of {len([t for t in targets.values() if t['type'] != 'system'])} targets imports")
    return 0


if __name__ == "__main__":
    sys.exit(main())
