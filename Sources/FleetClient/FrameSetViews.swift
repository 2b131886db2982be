import FleetCore
import FleetProtocol
import FleetRecording
import Foundation

/// A take's frame sets (recordings.md, "Frame sets"): the summary and the sets listed for
/// people, JSON for programs, and the CSV an export writes beside the take's files.
public enum FrameSetViews {
    public struct Sets: Encodable {
        struct Figures: Encodable {
            var medianNs, p99Ns, maxNs: Int64
            var samples: UInt32

            enum CodingKeys: String, CodingKey { case medianNs = "median_ns", p99Ns = "p99_ns", maxNs = "max_ns", samples }

            init(_ figures: Capfleet_V1_AuditFigures) {
                (medianNs, p99Ns, maxNs, samples) = (figures.medianNs, figures.p99Ns, figures.maxNs, figures.samples)
            }
        }
        struct Camera: Encodable {
            var deviceId: String
            var frames, paired, missing: UInt64
            var offset: Figures
            var exact: Bool

            enum CodingKeys: String, CodingKey { case deviceId = "device_id", frames, paired, missing, offset, exact }
        }
        struct Member: Encodable {
            var deviceId: String
            var sequence: UInt64
            var offsetNs: Int64

            enum CodingKeys: String, CodingKey { case deviceId = "device_id", sequence, offsetNs = "offset_ns" }
        }
        struct FrameSet: Encodable {
            var slotFleetNs, spreadNs: UInt64
            var complete, overTolerance: Bool
            var members: [Member]

            enum CodingKeys: String, CodingKey {
                case slotFleetNs = "slot_fleet_ns", spreadNs = "spread_ns", complete, overTolerance = "over_tolerance", members
            }
        }
        var take: String
        var intervalNs, toleranceNs, gridOriginFleetNs: UInt64
        var slotShiftNs: Int64
        var sets, complete, overTolerance: UInt64
        var spread: Figures
        var cameras: [Camera]
        var listed: [FrameSet]
        var truncated: Bool

        enum CodingKeys: String, CodingKey {
            case take, intervalNs = "interval_ns", toleranceNs = "tolerance_ns", gridOriginFleetNs = "grid_origin_fleet_ns",
                slotShiftNs = "slot_shift_ns", sets, complete, overTolerance = "over_tolerance", spread, cameras, listed, truncated
        }

        public init(take: String, _ sets: Capfleet_V1_FrameSets) {
            self.take = take
            (intervalNs, toleranceNs, gridOriginFleetNs, slotShiftNs) = (sets.intervalNs, sets.toleranceNs, sets.gridOriginFleetNs, sets.slotShiftNs)
            (self.sets, complete, overTolerance, truncated) = (sets.sets, sets.complete, sets.overTolerance, sets.truncated)
            spread = Figures(sets.spread)
            cameras = sets.cameras.map {
                Camera(deviceId: $0.deviceID, frames: $0.frames, paired: $0.paired, missing: $0.missing, offset: Figures($0.offset), exact: $0.exact)
            }
            let ids = sets.cameras.map(\.deviceID)
            listed = sets.listed.map { set in
                FrameSet(
                    slotFleetNs: set.slotFleetNs, spreadNs: set.spreadNs, complete: set.complete, overTolerance: set.overTolerance,
                    members: set.members.map {
                        Member(deviceId: Int($0.camera) < ids.count ? ids[Int($0.camera)] : "?", sequence: $0.sequence, offsetNs: $0.offsetNs)
                    })
            }
        }
    }

    /// `capfleet recordings sets`: what the sets add up to, a row per camera, then the sets
    /// listed (a row per slot, a column per camera: sequence and offset).
    public static func text(take: String, _ sets: Capfleet_V1_FrameSets, all: Bool) -> String {
        let spoken = { (ns: Int64) in TakeSyncVerdict.spoken(ns.magnitude) }
        var lines = [
            "take \(take): \(sets.sets) set(s) of \(sets.cameras.count) camera(s), slots every \(TakeSyncVerdict.spoken(sets.intervalNs)) "
                + "(\(FleetTables.signedDuration(sets.slotShiftNs)) from the fleet grid), tolerance \(TakeSyncVerdict.spoken(sets.toleranceNs))"
        ]
        let share = sets.sets == 0 ? 0 : Double(sets.complete) / Double(sets.sets) * 100
        lines.append(
            "complete: \(sets.complete) (\(String(format: "%.1f", share)) %); over the tolerance: \(sets.overTolerance)"
                + (sets.spread.samples > 0
                    ? "; spread of the complete sets: median \(spoken(sets.spread.medianNs)), p99 \(spoken(sets.spread.p99Ns)), max \(spoken(sets.spread.maxNs))"
                    : ""))
        lines.append("")
        lines.append(
            FleetTables.table(
                ["DEVICE", "FRAMES", "PAIRED", "MISSING", "|OFFSET| MEDIAN", "P99", "MAX", "TIMES"],
                sets.cameras.map { camera in
                    [
                        camera.deviceID, String(camera.frames), String(camera.paired), String(camera.missing), spoken(camera.offset.medianNs),
                        spoken(camera.offset.p99Ns), spoken(camera.offset.maxNs), camera.exact ? "exact" : "to 1 ms",
                    ]
                }))
        guard !sets.listed.isEmpty else {
            lines.append(all ? "no sets" : "every set is complete and within the tolerance")
            return lines.joined(separator: "\n")
        }
        lines.append("")
        lines.append(all ? "sets:" : "sets incomplete or over the tolerance:")
        let header = ["SLOT (FLEET NS)", "SPREAD", ""] + sets.cameras.map(\.deviceID)
        let rows = sets.listed.map { set -> [String] in
            var byCamera = Array(repeating: "-", count: sets.cameras.count)
            for member in set.members where Int(member.camera) < byCamera.count {
                byCamera[Int(member.camera)] = "#\(member.sequence) \(FleetTables.signedDuration(member.offsetNs))"
            }
            let marks = [set.complete ? nil : "incomplete", set.overTolerance ? "over" : nil].compactMap { $0 }.joined(separator: ", ")
            return [String(set.slotFleetNs), TakeSyncVerdict.spoken(set.spreadNs), marks] + byCamera
        }
        lines.append(FleetTables.table(header, rows))
        if sets.truncated { lines.append("… more sets than listed: ask from a later slot (--from) or for more (--limit)") }
        return lines.joined(separator: "\n")
    }

    /// Writes DIRECTORY/frame-sets.csv from a take's exported files (EXPORT/DEVICE/*.mkv):
    /// one row per set, a sequence and offset column per camera. The slots are those the
    /// coordinator gives (`FrameSetMaker`, the same grid and tolerance). Returns the file's path.
    public static func writeCSV(
        take info: Capfleet_V1_TakeInfo, exportedFiles: [String], directory: String, interval: UInt64?, tolerance: UInt64?
    ) throws -> String {
        let devices = info.devices.map(\.deviceID)
        let cameras = try devices.map { device in
            let paths = exportedFiles.filter { $0.hasSuffix(".mkv") && ($0 as NSString).deletingLastPathComponent.hasSuffix("/" + device) }.sorted()
            return try CameraFrameTimes.read(deviceID: device, paths: paths, takeStart: info.startFleetNs)
        }
        let slowest = info.devices.map(\.frameRate).filter { $0 > 0 }.min()
        guard let interval = interval ?? slowest.map({ UInt64((1e9 / $0).rounded()) }), interval > 0 else {
            throw FrameSetError.noFrameRate(take: info.id)
        }
        let asked = info.syncReport.requirements.maxSpreadNs
        var maker = FrameSetMaker(
            cameras: cameras.map(\.frames), gridOrigin: info.syncReport.gridOriginFleetNs, interval: interval,
            tolerance: tolerance ?? (asked > 0 ? asked : 1_000_000))
        var text =
            (["slot_fleet_ns", "spread_ns", "complete", "over_tolerance"] + devices.flatMap { ["\($0).sequence", "\($0).offset_ns"] })
            .joined(separator: ",") + "\n"
        while let set = maker.next() {
            var columns = Array(repeating: "", count: devices.count * 2)
            for member in set.members {
                columns[member.camera * 2] = String(member.sequence)
                columns[member.camera * 2 + 1] = String(member.offset)
            }
            text +=
                ([String(set.slot), String(set.spread), set.complete ? "1" : "0", set.overTolerance ? "1" : "0"] + columns)
                .joined(separator: ",") + "\n"
        }
        let path = directory + "/frame-sets.csv"
        do {
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        } catch {
            throw TransferError.cannotCreate(path: path, hint: "check that \(directory) is writable (\(error))")
        }
        return path
    }
}

public enum FrameSetError: Error, CustomStringConvertible {
    case noFrameRate(take: String)

    public var description: String {
        switch self {
        case let .noFrameRate(take): "take \(take) names no frame rate for its cameras: give the slots' spacing (--interval)"
        }
    }
}
