import FleetProtocol
import Foundation

/// A sensor stream's readings as `capfleet sensor` prints them (sensors.md): one line, or one
/// JSON object, per reading.
public enum SensorViews {
    /// `imu0 @ fleet 1795…  ax=0.01 ay=0 az=9.81 …  "cue 12"`.
    public static func line(_ batch: Capfleet_V1_SensorData, _ reading: Capfleet_V1_SensorReading) -> String {
        let when = reading.fleetTimeNs == 0 ? "no fleet time" : "fleet \(reading.fleetTimeNs)"
        let values = zip(batch.channels, reading.values).map { "\($0)=\(trim($1))" }.joined(separator: " ")
        let text = reading.text.isEmpty ? "" : "  \"\(reading.text)\""
        return "\(batch.stream) @ \(when)  " + values + text
    }

    public struct Reading: Encodable {
        var deviceId, nodeId, stream: String
        var fleetNs, monotonicNs: UInt64
        /// Channel name → value, in the stream's names.
        var values: [String: Double]
        var text: String?

        public init(_ batch: Capfleet_V1_SensorData, _ reading: Capfleet_V1_SensorReading) {
            deviceId = batch.deviceID; nodeId = batch.nodeID; stream = batch.stream
            fleetNs = reading.fleetTimeNs; monotonicNs = reading.monotonicNs
            values = Dictionary(zip(batch.channels, reading.values).map { ($0, $1) }, uniquingKeysWith: { $1 })
            text = reading.text.isEmpty ? nil : reading.text
        }

        enum CodingKeys: String, CodingKey {
            case deviceId = "device_id", nodeId = "node_id", stream, fleetNs = "fleet_ns", monotonicNs = "monotonic_ns", values, text
        }
    }

    /// A value in its shortest exact form: 9.81, 0, 1e-05.
    static func trim(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
    }
}
