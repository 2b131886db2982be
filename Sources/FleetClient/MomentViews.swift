import FleetProtocol

/// How the CLI shows moments (recordings.md, "Moments").
public enum MomentViews {
    /// `moment-… (name): 3 cameras at fleet time T, 1.5 s before to 1.5 s after; take …, still …`
    public static func summary(_ moment: Capfleet_V1_MomentInfo) -> String {
        let named = moment.name == moment.id ? "" : " (\(moment.name))"
        return
            "\(moment.id)\(named): \(moment.deviceIds.joined(separator: ", ")) at fleet time \(moment.instantFleetNs), \(seconds(moment.beforeMs)) before to \(seconds(moment.afterMs)) after; take \(moment.takeID), still \(moment.stillID)"
    }

    private static func seconds(_ milliseconds: UInt32) -> String {
        milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(Double(milliseconds) / 1000) s"
    }

    /// `capfleet moment --json`, `capfleet moments --json`: one moment, with its take and still
    /// when just taken.
    public struct Moment: Encodable {
        var id, name: String
        var instantFleetNs: UInt64
        var beforeMs, afterMs: UInt32
        var takeId, stillId: String
        var devices: [String]
        var createdUnixMs: Int64
        var createdBy, trigger: String
        var take: RecordingViews.Take?
        var still: StillViews.Still?

        public init(_ moment: Capfleet_V1_MomentInfo, take: Capfleet_V1_TakeInfo?, still: Capfleet_V1_StillInfo?) {
            id = moment.id; name = moment.name; instantFleetNs = moment.instantFleetNs
            beforeMs = moment.beforeMs; afterMs = moment.afterMs
            takeId = moment.takeID; stillId = moment.stillID; devices = moment.deviceIds
            createdUnixMs = moment.createdUnixMs; createdBy = moment.createdBy; trigger = moment.trigger
            self.take = take.map { RecordingViews.Take($0) }
            self.still = still.map { StillViews.Still($0) }
        }

        enum CodingKeys: String, CodingKey {
            case id, name, instantFleetNs = "instant_fleet_ns", beforeMs = "before_ms", afterMs = "after_ms", takeId = "take_id",
                stillId = "still_id", devices, createdUnixMs = "created_unix_ms", createdBy = "created_by", trigger, take, still
        }
    }
}
