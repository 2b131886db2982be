import FleetCore
import Foundation

/// A timed-metadata entry with a camera's auto-framing crop from the frame at its time on
/// (detection.md, "Auto-framing"): written before a segment's first framed frame and wherever
/// the crop changes (to 1/10000 of the frame), so a take keeps the whole picture and can be
/// reframed as it was, differently, or not at all.
public struct FramingEntry: Sendable, Equatable {
    public static let kind = "framing"
    public var sequence: UInt64
    public var fleetTime: UInt64
    /// nil: framing was turned off from this frame on.
    public var crop: NormalizedRect?
    /// The camera's own zoom, pan and tilt framed it (detection.md, "Framing with the camera's
    /// optics"): the frames hold only the crop, which says where in the whole view they are.
    public var optical: Bool

    public init(sequence: UInt64, fleetTime: UInt64, crop: NormalizedRect?, optical: Bool = false) {
        self.sequence = sequence
        self.fleetTime = fleetTime
        self.crop = crop
        self.optical = optical
    }

    /// The crop as the entry writes it: four decimals, which is what "changed" compares.
    public static func rounded(_ crop: NormalizedRect?) -> NormalizedRect? {
        crop.map {
            func round(_ value: Double) -> Double { (value * 10_000).rounded() / 10_000 }
            return NormalizedRect(x: round($0.x), y: round($0.y), width: round($0.width), height: round($0.height))
        }
    }

    /// `{"kind":"framing","sequence":…,"fleet_ns":…,"active":true,"crop":[x,y,w,h]}`, with
    /// `"optical":true` when the optics framed it; off: `"active":false` and no crop.
    public var json: String {
        var text = #"{"kind":"framing","sequence":\#(sequence),"fleet_ns":\#(fleetTime)"#
        if let crop = Self.rounded(crop) {
            text += #","active":\#(crop != .whole),"crop":[\#(crop.x),\#(crop.y),\#(crop.width),\#(crop.height)]"#
            if optical { text += #","optical":true"# }
        } else {
            text += #","active":false"#
        }
        return text + "}"
    }

    /// Reads an entry back from the metadata track; nil for any other entry.
    public init?(json: String) {
        guard json.contains("\"kind\":\"framing\""),
            let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any],
            object["kind"] as? String == Self.kind, let sequence = (object["sequence"] as? NSNumber)?.uint64Value,
            let fleetTime = (object["fleet_ns"] as? NSNumber)?.uint64Value
        else { return nil }
        var crop: NormalizedRect?
        if let values = object["crop"] as? [Double], values.count == 4 {
            crop = NormalizedRect(x: values[0], y: values[1], width: values[2], height: values[3])
        }
        self.init(sequence: sequence, fleetTime: fleetTime, crop: crop, optical: object["optical"] as? Bool ?? false)
    }

    /// A segment file's framing entries, in order (only its metadata is read). Blocking disk I/O.
    public static func entries(in path: String) throws(RecordingError) -> [FramingEntry] {
        var entries: [FramingEntry] = []
        try SegmentPackets.read(path, skippingVideo: true) { packet in
            if case let .metadata(json) = packet, let entry = FramingEntry(json: json) { entries.append(entry) }
        }
        return entries
    }
}
