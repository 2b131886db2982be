import FleetClient
import FleetCore
import FleetProtocol
import Foundation

/// One still's capture times across the cameras, in nanoseconds: as the agents stamped them
/// in fleet time and true.
struct StillSpread {
    /// `StillInfo.spread_ns`: the latest minus the earliest stamped capture time.
    var stamped: Double
    var truth: Double
    /// Each picture's |spread_ns| to its instant, and the same of its true capture time.
    var stampedToInstant: [Double]
    var trueToInstant: [Double]
}

/// One still from TakeStill to every picture stored on the coordinator.
struct StillTransfer {
    var seconds: Double
    /// When TakeStill was answered: every agent had written its pictures.
    var answered: Double
    /// The still as the coordinator describes it once stored.
    var still: Capfleet_V1_StillInfo

    var images: [Capfleet_V1_StillImageInfo] { still.devices.flatMap(\.images) }
    /// Each camera's time away from its streaming format, ns.
    var away: [UInt64] { still.devices.map(\.awayNs) }
    var bytes: UInt64 { images.reduce(0) { $0 + $1.sizeBytes } }
    /// The pictures' format, `4608x3456 YUYV`.
    var size: String { images.first.map { "\($0.width)x\($0.height) \($0.pixelFormat)" } ?? "" }
    /// The largest |spread_ns| of a picture to its instant, ns.
    var farthest: Double { images.map { Double(abs($0.spreadNs)) }.max() ?? 0 }
}

/// Takes the stills benchmark's stills and measures them. A still some camera took no
/// picture for (or whose picture was not stored) is said, with the lines its agent logged,
/// and left out of the figures.
struct StillTaker {
    let hosts: NetnsBenchFleet
    let devices: [String]
    private let session: OperatorSession

    init(hosts: NetnsBenchFleet, devices: [String]) {
        self.hosts = hosts
        self.devices = devices
        session = OperatorSession(client: hosts.client)
    }

    /// The still's spread against truth, from each camera's first picture and its sidecar.
    func spread(_ query: Capfleet_V1_TakeStill) throws -> StillSpread? {
        guard let info = try storedWhole(query) else { return nil }
        var trueTimes: [Int64] = []
        var stampedToInstant: [Double] = []
        var trueToInstant: [Double] = []
        for device in info.devices {
            guard let image = device.images.first else { continue }
            let sidecar = try JSONDecoder().decode(Sidecar.self, from: Data(image.sidecarJson.utf8))
            let truth = hosts.truth.fleetTime(device: device.deviceID, local: sidecar.captureLocal)
            trueTimes.append(truth)
            stampedToInstant.append(Double(abs(image.spreadNs)))
            trueToInstant.append(Double(abs(truth - Int64(bitPattern: image.requestedFleetNs))))
        }
        return StillSpread(
            stamped: Double(info.spreadNs), truth: Double(trueTimes.max()! - trueTimes.min()!),
            stampedToInstant: stampedToInstant, trueToInstant: trueToInstant)
    }

    /// The wall time from sending TakeStill to GetStill saying "stored".
    func timeToStored(_ query: Capfleet_V1_TakeStill) throws -> StillTransfer? {
        let start = MonotonicTime.now()
        var answered = 0.0
        guard let info = try storedWhole(query, answered: { answered = Double(MonotonicTime.now() - start) / 1e9 }) else { return nil }
        return StillTransfer(seconds: Double(MonotonicTime.now() - start) / 1e9, answered: answered, still: info)
    }

    /// Takes the still and follows it until nothing of it is being copied (GetStill every
    /// 20 ms, two minutes at most); nil, having said why, unless every camera's pictures are stored.
    private func storedWhole(_ query: Capfleet_V1_TakeStill, answered: () -> Void = {}) throws -> Capfleet_V1_StillInfo? {
        let taken: Capfleet_V1_StillInfo
        do {
            guard let first = try session.takeStill(query).stills.first else {
                print("  a still: the coordinator took it but did not describe it")
                return nil
            }
            taken = first
        } catch {
            print("  a still was refused: \(error)")
            return nil
        }
        answered()
        var info = taken
        let deadline = Date().addingTimeInterval(120)
        while info.state == "capturing" || info.state == "collecting" {
            guard Date() < deadline else {
                print("  still \(info.id): not stored after 120 s, state \(info.state)")
                return nil
            }
            Thread.sleep(forTimeInterval: 0.02)
            guard let now = try session.call(.getStill(.with { $0.stillID = taken.id })).reply.stills.first else {
                throw BenchFailure("the coordinator no longer describes still \(taken.id)")
            }
            info = now
        }
        let missing = info.devices.filter { $0.state != "stored" }
        guard missing.isEmpty, info.devices.count == devices.count else {
            explain(info, missing)
            return nil
        }
        return info
    }

    /// Each camera that took no picture, or whose picture was not stored, with its error and
    /// its agent's log lines about the still. A coordinator that stopped waiting may have left
    /// the agent at work, so those lines are waited for (30 s at most for the still), else the
    /// log's last lines are shown.
    private func explain(_ info: Capfleet_V1_StillInfo, _ missing: [Capfleet_V1_StillDeviceInfo]) {
        print("  still \(info.id) (\(info.state)): \(missing.count) of \(devices.count) camera(s) without a stored picture")
        let deadline = Date().addingTimeInterval(30)
        for device in missing {
            let node = hosts.nodeNames[device.nodeID] ?? device.nodeID
            print("    \(device.deviceID) on \(node), \(device.state): \(device.error.isEmpty ? "(no error given)" : device.error)")
            guard let log = hosts.agentLog(node: device.nodeID) else { continue }
            func lines() -> [Substring] { ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n") }
            var logged = lines()
            while !logged.contains(where: { $0.contains(info.id) }), Date() < deadline {
                Thread.sleep(forTimeInterval: 1)
                logged = lines()
            }
            let about = logged.filter { $0.contains(info.id) }
            print("    \(log), \(about.isEmpty ? "its last lines (none names the still)" : "its lines about the still"):")
            for line in (about.isEmpty ? logged.suffix(10) : about.suffix(20)) { print("      \(line)") }
        }
    }
}

/// What the benchmark reads of a picture's sidecar (stills.md, "The sidecar").
private struct Sidecar: Decodable {
    /// The frame's capture time in its node's (skewed) clock.
    var captureLocal: UInt64

    enum CodingKeys: String, CodingKey {
        case captureLocal = "capture_local_ns"
    }
}
