import CPlatform
import FleetBus
import FleetClient
import FleetCore
import FleetHost
import FleetProtocol
import FleetSystem
import FleetTestSupport
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A coordinator and agent hosts on network namespaces (deploy/netns-fleet.sh) as the clock
/// and stills benchmarks measure them: agent I's clock deliberately off by `skews[I-1]`, its
/// link through `capfleet-relay`, an operator client in the coordinator's namespace, and the
/// truth a capture time is judged against (the namespaces share one kernel clock).
struct NetnsBenchFleet {
    static let skews = ["+3.2s,+50ppm", "-1.5s,-50ppm", "+0.7s,-20ppm", "-0.2s,+35ppm"]
    static let cleanLink = "delay=1ms,jitter=200us"

    let script: NetnsFleetScript
    let client: OperatorClient
    let truth: Truth
    /// The agent hosts' node ids and their names, a1, a2, …
    let nodeNames: [String: String]
    /// The agent hosts' cameras.
    let devices: [Capfleet_V1_DeviceInfo]

    /// Whether this process may build namespaces; says so when it may not.
    static func mayRun(_ benchmark: String) -> Bool {
        guard getuid() == 0 else {
            print("== \(benchmark): skipped, network namespaces need root (run as root, as CI does)")
            return false
        }
        return true
    }

    /// `script up` with `agents` hosts on clean links, skewed, each agent with `agentArguments`
    /// (the capfleet beside this binary; the script finds capfleet-relay beside that, and
    /// hands each daemon its `--setting` values as CAPFLEET_<KEY>, and no other CAPFLEET_*).
    /// Expects `camerasPerAgent` cameras a host.
    static func up(
        _ script: NetnsFleetScript, agents: Int, agentArguments: String, settings: [String] = [],
        camerasPerAgent: Int = 1, upArguments: [String] = []
    ) throws -> NetnsBenchFleet {
        var skewArguments: [String] = []
        for index in 1...agents { skewArguments += ["--skew", "\(index)=\(skews[(index - 1) % skews.count])"] }
        try script.run(
            [
                "up", "--agents", "\(agents)", "--bin", try CapfleetBinary.checked(), "--impair", cleanLink,
                "--agent-args", agentArguments,
            ] + skewArguments + settings.flatMap { ["--setting", $0] } + upArguments)
        let prefix = script.prefix, data = script.data
        progress("fleet up; connecting from namespace \(prefix)-coord")
        let client = try NetworkNamespace.operatorClient(
            namespace: "\(prefix)-coord", address: "10.77.0.1:7602", credentialPath: data + "/admin.credential")
        let credential = try OperatorCredential.load(path: data + "/admin.credential")
        let epoch = try NetworkNamespace.fleetEpoch(
            namespace: "\(prefix)-coord", endpoint: "tcp://10.77.0.1:7605",
            agentStateDirectory: data + "/a1/state", coordinatorKey: credential.coordinatorKey)
        let localEpoch = Int64(bitPattern: FleetTimeSource().epochOffset)
        progress(
            "fleet-time epoch from the coordinator's clock endpoint; this process's wall minus monotonic differs by \(localEpoch - Int64(bitPattern: epoch)) ns"
        )

        // Each device, and the skew of the node it is on.
        var clocks: [String: NodeClock] = [:]
        var names: [String: String] = [:]
        for node in try client.call(.listNodes(.init())).reply.nodes {
            guard let index = Int(node.name.dropFirst()), index >= 1 else { continue }
            clocks[node.nodeID] = NodeClock(testSetting: skews[(index - 1) % skews.count])
            names[node.nodeID] = node.name
        }
        let devices = try client.call(.listDevices(.init())).reply.devices.filter { clocks[$0.nodeID] != nil }
        guard devices.count == agents * camerasPerAgent else {
            throw BenchFailure("expected \(agents * camerasPerAgent) devices, the coordinator lists \(devices.count)")
        }
        let truth = Truth(epoch: epoch, clocks: Dictionary(uniqueKeysWithValues: devices.map { ($0.deviceID, clocks[$0.nodeID]!) }))
        return NetnsBenchFleet(script: script, client: client, truth: truth, nodeNames: names, devices: devices)
    }

    /// Seconds until every node's clock is reported locked (in a report heard after `heardAfter`).
    func waitForLock(nodes: Set<String>? = nil, seconds: Double, heardAfter: Date? = nil) throws -> Double {
        let nodes = nodes ?? Set(nodeNames.keys)
        let start = heardAfter ?? Date()
        let deadline = start.addingTimeInterval(seconds)
        let after = Int64((heardAfter?.timeIntervalSince1970 ?? 0) * 1000)
        while Date() < deadline {
            let listed = try client.call(.listNodes(.init())).reply.nodes.filter { nodes.contains($0.nodeID) }
            let lockedNow = listed.filter { $0.online && $0.clock.sync == .locked && $0.clock.reportedUnixMs > after }
            if lockedNow.count == nodes.count {
                let heard = lockedNow.map { Double($0.clock.reportedUnixMs) / 1000 }.max() ?? Date().timeIntervalSince1970
                return heard - start.timeIntervalSince1970
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        throw BenchFailure("clocks of \(nodes.sorted().joined(separator: ", ")) not locked within \(fmt(seconds)) s")
    }

    /// Frame alignment on for `devices`, each under this operator's configuration lease (which
    /// alignment needs) for the rest of the run.
    func align(_ devices: [String]) throws {
        for device in devices {
            _ = try client.call(
                .lockDevice(
                    .with {
                        $0.deviceID = device; $0.seconds = 3600
                    }))
        }
        _ = try client.call(
            .changeFrameAlignment(
                .with {
                    $0.deviceIds = devices; $0.enabled = true
                }))
    }

    /// Consent granted to `devices`: their pictures are test patterns, no one's likeness.
    func grantConsent(_ devices: [String]) throws {
        for device in devices {
            try client.grantTestPatternConsent(device)
        }
    }

    /// The log the script keeps of the agent on node `nodeID`.
    func agentLog(node nodeID: String) -> String? {
        nodeNames[nodeID].map { script.data + "/logs/agent-\($0).log" }
    }
}

/// The truth every sample is judged against.
struct Truth {
    let epoch: UInt64
    let clocks: [String: NodeClock]

    /// The true fleet time of a moment a device's node clock read `local`.
    func fleetTime(device: String, local: UInt64) -> Int64 {
        let clock = clocks[device] ?? .system
        return Int64(bitPattern: clock.monotonic(fromLocal: local) &+ epoch)
    }
}

/// Operator clients whose sockets live in another network namespace.
enum NetworkNamespace {
    /// Makes the client on a thread that first moves into `namespace`: libzmq starts its
    /// I/O threads from the thread that makes the first socket, and new threads (and the
    /// sockets they open) stay in their creator's namespace.
    static func operatorClient(namespace: String, address: String, credentialPath: String) throws -> OperatorClient {
        let credential = try OperatorCredential.load(path: credentialPath)
        guard let coordinator = CoordinatorAddress(address, defaultPort: 7602) else { throw BenchFailure("bad address \(address)") }
        let made = Mutex<Result<OperatorClient, any Error>?>(nil)
        let thread = OwnedThread(name: "cf-bench-netns") {
            guard capfleet_enter_network_namespace(namespace) == 0 else {
                made.withLock { $0 = .failure(BenchFailure("cannot enter network namespace \(namespace): \(String(cString: strerror(errno)))")) }
                return
            }
            made.withLock { result in result = Result { try OperatorClient(address: coordinator, credential: credential, timeout: 10) } }
        }
        thread.joinBlocking()
        return try made.withLock { $0! }.get()
    }
}

extension NetworkNamespace {
    /// The coordinator's fleet-time epoch (fleet time minus its CLOCK_MONOTONIC) exactly as
    /// it stamps probes: one clock probe from `namespace` with an enrolled agent's key (the
    /// clock endpoint admits node keys only). Reading the wall and monotonic clocks here
    /// instead would differ by however long the coordinator was preempted between its two
    /// reads at start.
    static func fleetEpoch(namespace: String, endpoint: String, agentStateDirectory: String, coordinatorKey: CurvePublicKey) throws -> UInt64 {
        guard let keys = try CurveCertificate.load(path: agentStateDirectory + "/keys/agent.key_secret").keys else {
            throw BenchFailure("no agent key in \(agentStateDirectory)")
        }
        let result = Mutex<Result<UInt64, any Error>?>(nil)
        let thread = OwnedThread(name: "cf-bench-netns") {
            let outcome = Result<UInt64, any Error> {
                guard capfleet_enter_network_namespace(namespace) == 0 else {
                    throw BenchFailure("cannot enter network namespace \(namespace): \(String(cString: strerror(errno)))")
                }
                let socket = try ZMQSocket(context: ZMQContext(), type: .dealer)
                try socket.makeCurveClient(serverKey: coordinatorKey, keys: keys)
                try socket.connect(endpoint)
                let request = Capfleet_V1_ClockProbeRequest.with {
                    $0.protocolVersion = WireDefaults.protocolMajor
                    $0.sequence = 1
                }
                try socket.send(try request.serializedBytes() as [UInt8])
                guard socket.waitForInput(milliseconds: 5_000), let received = try? socket.receiveMultipart(dontWait: true, maxParts: 2),
                    let part = received.parts.first, let reply = try? Capfleet_V1_ClockProbeReply(serializedBytes: part.array),
                    reply.status.isOK
                else { throw BenchFailure("no clock probe answer from \(endpoint)") }
                return reply.timebase
            }
            result.withLock { $0 = outcome }
        }
        thread.joinBlocking()
        return try result.withLock { $0! }.get()
    }
}
