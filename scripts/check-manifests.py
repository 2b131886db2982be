#!/usr/bin/python3
"""Static checks of the container and Kubernetes files, which no CI machine here can run (no
container engine, no cluster): deploy/Dockerfile, deploy/compose.yaml, deploy/k8s/*.yaml.
Every file parses, has the fields its kind requires, and every capfleet command line in them
uses options the binary knows (its --help is asked).

    scripts/check-manifests.py BINARY

Prints one line per check; exits 1 if any fails."""
import glob
import os
import re
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".build/release/capfleet")
PORTS = set(range(7600, 7608))
failures = []
passed = 0


def check(what, ok, detail=""):
    global passed
    if ok:
        passed += 1
        print(f"ok    {what}")
    else:
        failures.append(what)
        print(f"FAIL  {what}{': ' + detail if detail else ''}")


_help = {}


def known_options(subcommand):
    if subcommand not in _help:
        text = subprocess.run([BINARY, subcommand, "--help"], capture_output=True, text=True).stdout
        _help[subcommand] = set(re.findall(r"--[a-z][a-z0-9-]*", text))
    return _help[subcommand]


def check_command(where, args):
    check(f"{where}: runs a capfleet service", bool(args) and args[0] in ("coordinator", "agent"), str(args))
    if args and args[0] in ("coordinator", "agent"):
        unknown = [a for a in args[1:] if a.startswith("--") and a not in known_options(args[0])]
        check(f"{where}: every option of `capfleet {args[0]}` exists", not unknown, f"unknown {unknown}")


# Dockerfile: multi-stage, the runtime stage slim Debian with runtime libraries only.
text = open(os.path.join(ROOT, "deploy/Dockerfile")).read()
stages = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", text, re.M)
check("Dockerfile: multi-stage (a build stage and a runtime stage)", len(stages) >= 2, str(stages))
check("Dockerfile: builds with Swift", stages and stages[0][0].startswith("swift:"), stages[0][0] if stages else "")
check("Dockerfile: runs on slim Debian 12", stages and re.match(r"debian:bookworm-slim", stages[-1][0]) is not None,
      stages[-1][0] if stages else "")
runtime = text.split(f"FROM {stages[-1][0]}")[1] if stages else ""
check("Dockerfile: runtime stage copies the binary from the build stage", "COPY --from=build" in runtime)
check("Dockerfile: runtime stage installs no -dev package", re.search(r"\blib\S+-dev\b", runtime) is None)
for library in ("libzmq5", "libv4l-0", "libsqlite3-0", "libavformat59"):
    check(f"Dockerfile: runtime stage installs {library}", library in runtime)
check("Dockerfile: builds with --static-swift-stdlib (no Swift runtime needed at run time)", "--static-swift-stdlib" in text)
for source in re.findall(r"^COPY\s+(?!--from)(.+)\s+\S+$", text, re.M):
    for path in source.split():
        check(f"Dockerfile: COPY source {path} exists", os.path.exists(os.path.join(ROOT, path)))
check("Dockerfile: does not run as root", re.search(r"^USER\s+(?!root)\S+", runtime, re.M) is not None)
entry = re.search(r'^CMD\s+(\[.*\])', runtime, re.M)
check("Dockerfile: has a default command", entry is not None)
if entry:
    check_command("Dockerfile CMD", yaml.safe_load(entry.group(1)))

# compose.yaml
compose = yaml.safe_load(open(os.path.join(ROOT, "deploy/compose.yaml")))
services = compose.get("services", {})
check("compose.yaml: services coordinator and agent", {"coordinator", "agent"} <= set(services), str(list(services)))
coordinator, agent = services.get("coordinator", {}), services.get("agent", {})
build = coordinator.get("build", {})
context = os.path.normpath(os.path.join(ROOT, "deploy", build.get("context", ".")))
check("compose.yaml: the coordinator builds from deploy/Dockerfile",
      os.path.exists(os.path.join(context, build.get("dockerfile", "Dockerfile"))), str(build))
published = {int(str(p).split(":")[-1].split("/")[0]) for p in coordinator.get("ports", [])}
check("compose.yaml: the coordinator publishes ports 7600-7607", PORTS <= published, str(sorted(published)))
check("compose.yaml: the coordinator keeps /var/lib/capfleet on a volume",
      any(str(v).endswith(":/var/lib/capfleet") for v in coordinator.get("volumes", [])))
check("compose.yaml: the agent gets /dev/video* passed through",
      any(str(d).startswith("/dev/video") for d in agent.get("devices", [])), str(agent.get("devices")))
check("compose.yaml: the agent finds the coordinator", "CAPFLEET_COORDINATOR" in agent.get("environment", {}))
# The HTTP port binds 127.0.0.1 unless told: a published port would reach nothing.
check("compose.yaml: the coordinator's dashboard and /metrics bind beyond the container",
      str((coordinator.get("environment") or {}).get("CAPFLEET_HTTP_BIND")) == "0.0.0.0")
for name, service in services.items():
    check_command(f"compose.yaml {name}", service.get("command", []))
for volume in [str(v).split(":")[0] for s in services.values() for v in s.get("volumes", [])]:
    if not volume.startswith("/"):
        check(f"compose.yaml: volume {volume} is declared", volume in (compose.get("volumes") or {}))

# Kubernetes
documents = []
for path in sorted(glob.glob(os.path.join(ROOT, "deploy/k8s/*.yaml"))):
    for document in yaml.safe_load_all(open(path)):
        if document:
            documents.append((os.path.basename(path), document))
check("k8s: the manifests parse", len(documents) >= 4, f"{len(documents)} documents")
for file, document in documents:
    kind = document.get("kind", "?")
    where = f"k8s {file} {kind}"
    check(f"{where}: apiVersion, kind, metadata.name", all([document.get("apiVersion"), document.get("kind"),
                                                              document.get("metadata", {}).get("name")]))
    if kind in ("StatefulSet", "DaemonSet", "Deployment"):
        spec = document.get("spec", {})
        selector = spec.get("selector", {}).get("matchLabels", {})
        labels = spec.get("template", {}).get("metadata", {}).get("labels", {})
        check(f"{where}: the selector matches the pod's labels", selector and selector.items() <= labels.items())
        containers = spec.get("template", {}).get("spec", {}).get("containers", [])
        check(f"{where}: has containers with an image", containers and all(c.get("image") for c in containers))
        for container in containers:
            check_command(f"{where} {container.get('name')}", container.get("args", []))
    if kind == "StatefulSet":
        check(f"{where}: exactly one coordinator", document["spec"].get("replicas") == 1)
        env = {e["name"]: e.get("value") for c in document["spec"]["template"]["spec"]["containers"] for e in c.get("env", [])}
        check(f"{where}: the dashboard and /metrics bind the pod's address (the liveness probe's)", env.get("CAPFLEET_HTTP_BIND") == "0.0.0.0")
        claims = document["spec"].get("volumeClaimTemplates", [])
        mounts = [m for c in document["spec"]["template"]["spec"]["containers"] for m in c.get("volumeMounts", [])]
        check(f"{where}: a persistent volume at /var/lib/capfleet",
              any(m.get("mountPath") == "/var/lib/capfleet" and m.get("name") in [t["metadata"]["name"] for t in claims] for m in mounts))
    if kind == "DaemonSet":
        pod = document["spec"]["template"]["spec"]
        check(f"{where}: runs on labelled camera nodes only", bool(pod.get("nodeSelector")))
        check(f"{where}: gets the node's /dev", any(v.get("hostPath", {}).get("path") == "/dev" for v in pod.get("volumes", [])))
        env = {e["name"] for c in pod["containers"] for e in c.get("env", [])}
        check(f"{where}: finds the coordinator", "CAPFLEET_COORDINATOR" in env)
    if kind == "Service":
        ports = {p.get("port") for p in document.get("spec", {}).get("ports", [])}
        check(f"{where}: exposes 7600-7607", PORTS <= ports, str(sorted(ports)))

print(f"manifest checks: {passed} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
