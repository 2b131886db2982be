import FleetCore
import FleetProtocol
import Foundation

/// How the CLI reads and shows pre-roll (recordings.md, "Pre-roll").
public enum PreRollViews {
    /// `5s`, `1.5s`, `500ms` or `5` (seconds) as milliseconds; nil for anything else or a
    /// duration above the most an agent keeps.
    public static func milliseconds(_ text: String) -> UInt32? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        let (number, scale): (Substring, Double) =
            trimmed.hasSuffix("ms")
            ? (trimmed.dropLast(2), 1) : trimmed.hasSuffix("s") ? (trimmed.dropLast(), 1000) : (Substring(trimmed), 1000)
        guard let value = Double(number), value.isFinite, value > 0 else { return nil }
        let milliseconds = (value * scale).rounded()
        guard milliseconds >= 1, milliseconds <= PreRollSettings.maximumSeconds * 1000 else { return nil }
        return UInt32(milliseconds)
    }

    /// `5 s within 256 MiB; keeps 4.9 s now (49 frames, 14.7 MiB)`, or `off`.
    public static func summary(_ preRoll: Capfleet_V1_PreRoll) -> String {
        guard preRoll.milliseconds > 0 else { return "off" }
        var text = "\(seconds(UInt64(preRoll.milliseconds) * 1_000_000)) within \(preRoll.budgetBytes >> 20) MiB"
        if preRoll.hasEncoding, let encoding = TakeEncoding(wire: preRoll.encoding) { text += ", encoded as \(encoding.summary)" }
        if preRoll.diskBudgetBytes > 0 { text += ", and \(preRoll.diskBudgetBytes >> 20) MiB of disk" }
        if preRoll.keptFrames > 0 || preRoll.keptNs > 0 {
            text += "; keeps \(seconds(preRoll.keptNs)) now (\(preRoll.keptFrames) frames, \(RecordingViews.bytes(preRoll.keptBytes))"
            text += preRoll.keptDiskBytes > 0 ? ", \(RecordingViews.bytes(preRoll.keptDiskBytes)) on disk)" : ")"
        }
        if preRoll.budgetInForceBytes > 0 || preRoll.keptFrames > 0, preRoll.budgetInForceBytes < preRoll.budgetBytes {
            text += "; pressure leaves it \(preRoll.budgetInForceBytes >> 20) MiB"
        }
        return text
    }

    private static func seconds(_ nanoseconds: UInt64) -> String {
        let value = (Double(nanoseconds) / 1e8).rounded() / 10
        return value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }

    /// `capfleet preroll --json`: one device's pre-roll.
    public struct Entry: Encodable {
        var device: String
        var milliseconds: UInt32
        var budgetBytes: UInt64
        var keptNs: UInt64?
        var keptBytes: UInt64?
        var keptFrames: UInt32?
        var budgetInForceBytes: UInt64?
        /// Kept encoded: "h264 crf 23"; nil: raw frames.
        var encoding: String?
        var diskBudgetBytes: UInt64?
        var keptDiskBytes: UInt64?

        public init(device: String, _ preRoll: Capfleet_V1_PreRoll) {
            encoding = preRoll.hasEncoding ? TakeEncoding(wire: preRoll.encoding)?.summary : nil
            self.device = device
            milliseconds = preRoll.milliseconds
            budgetBytes = preRoll.budgetBytes
            let reported = preRoll.keptFrames > 0 || preRoll.keptNs > 0
            keptNs = reported ? preRoll.keptNs : nil
            keptBytes = reported ? preRoll.keptBytes : nil
            keptFrames = reported ? preRoll.keptFrames : nil
            budgetInForceBytes = reported ? preRoll.budgetInForceBytes : nil
            diskBudgetBytes = preRoll.diskBudgetBytes > 0 ? preRoll.diskBudgetBytes : nil
            keptDiskBytes = reported && preRoll.diskBudgetBytes > 0 ? preRoll.keptDiskBytes : nil
        }

        enum CodingKeys: String, CodingKey {
            case device, milliseconds, budgetBytes = "budget_bytes", keptNs = "kept_ns", keptBytes = "kept_bytes", keptFrames = "kept_frames",
                budgetInForceBytes = "budget_in_force_bytes", encoding, diskBudgetBytes = "disk_budget_bytes", keptDiskBytes = "kept_disk_bytes"
        }
    }
}
