/// GigE Vision's action command (GVCP `ACTION_CMD`, GigE Vision 2.0, "Action commands"): one
/// UDP datagram to port 3956, often broadcast, that makes every camera whose action device key
/// and group key match, and whose group mask shares a bit, assert its action signal (wired, in
/// the camera, to FrameStart's trigger source `Action1`, say). A **scheduled** action command
/// carries an action time in the cameras' own clock (IEEE 1588 ns on PTP cameras): each camera
/// acts when its clock reaches it, so cameras locked to one PTP grandmaster expose together
/// whatever the network's delay. Aravis 0.8 has no call for it; this is the packet, as the
/// standard lays it out, big-endian:
///
///     0  0x42 key code        1  flags: 0x80 action_time present, 0x01 acknowledge wanted
///     2  command 0x0100       4  payload length (12, or 20 with action_time)   6  req_id
///     8  device_key          12  group_key         16  group_mask       (20  action_time, u64)
///
/// A camera that was asked to acknowledge answers with an `ACTION_ACK` (0x0101): the 8-byte
/// acknowledge header (status, 0x0101, length 0, ack_id = req_id).
public struct GVCPActionCommand: Sendable, Equatable {
    public var deviceKey: UInt32
    public var groupKey: UInt32
    public var groupMask: UInt32
    /// When the cameras act, in their own clock's ns; nil: as soon as each receives it.
    public var actionTime: UInt64?
    public var acknowledge: Bool
    public var requestID: UInt16

    public static let port: UInt16 = 3956
    static let keyCode: UInt8 = 0x42
    static let command: UInt16 = 0x0100
    static let acknowledgement: UInt16 = 0x0101
    static let scheduledFlag: UInt8 = 0x80
    static let acknowledgeFlag: UInt8 = 0x01

    public init(deviceKey: UInt32, groupKey: UInt32, groupMask: UInt32, actionTime: UInt64? = nil, acknowledge: Bool = true, requestID: UInt16) {
        self.deviceKey = deviceKey
        self.groupKey = groupKey
        self.groupMask = groupMask
        self.actionTime = actionTime
        self.acknowledge = acknowledge
        self.requestID = requestID
    }

    /// The datagram.
    public var encoded: [UInt8] {
        var bytes: [UInt8] = [Self.keyCode, (actionTime == nil ? 0 : Self.scheduledFlag) | (acknowledge ? Self.acknowledgeFlag : 0)]
        Self.append(Self.command, to: &bytes)
        Self.append(UInt16(actionTime == nil ? 12 : 20), to: &bytes)
        Self.append(requestID, to: &bytes)
        Self.append(deviceKey, to: &bytes)
        Self.append(groupKey, to: &bytes)
        Self.append(groupMask, to: &bytes)
        if let actionTime { Self.append(actionTime, to: &bytes) }
        return bytes
    }

    /// A datagram read back (what a camera does with it): nil unless it is a well-formed action command.
    public init?(decoding bytes: [UInt8]) {
        guard bytes.count >= 20, bytes[0] == Self.keyCode, Self.read(UInt16.self, bytes, at: 2) == Self.command else { return nil }
        let flags = bytes[1]
        let length = Int(Self.read(UInt16.self, bytes, at: 4))
        let scheduled = flags & Self.scheduledFlag != 0
        guard length == (scheduled ? 20 : 12), bytes.count == 8 + length else { return nil }
        self.init(
            deviceKey: Self.read(UInt32.self, bytes, at: 8), groupKey: Self.read(UInt32.self, bytes, at: 12),
            groupMask: Self.read(UInt32.self, bytes, at: 16), actionTime: scheduled ? Self.read(UInt64.self, bytes, at: 20) : nil,
            acknowledge: flags & Self.acknowledgeFlag != 0, requestID: Self.read(UInt16.self, bytes, at: 6))
    }

    /// The acknowledgement a camera sends for request `requestID` with `status` (0: success).
    public static func acknowledgement(requestID: UInt16, status: UInt16 = 0) -> [UInt8] {
        var bytes: [UInt8] = []
        append(status, to: &bytes)
        append(acknowledgement, to: &bytes)
        append(UInt16(0), to: &bytes)
        append(requestID, to: &bytes)
        return bytes
    }

    /// An `ACTION_ACK` datagram: the request it answers and the camera's status (0: success;
    /// GigE Vision's 0x8xxx codes otherwise, e.g. 0x8013 when the action time is already past).
    public struct Acknowledgement: Sendable, Equatable {
        public var requestID: UInt16
        public var status: UInt16

        public init?(decoding bytes: [UInt8]) {
            guard bytes.count >= 8, GVCPActionCommand.read(UInt16.self, bytes, at: 2) == GVCPActionCommand.acknowledgement else { return nil }
            status = GVCPActionCommand.read(UInt16.self, bytes, at: 0)
            requestID = GVCPActionCommand.read(UInt16.self, bytes, at: 6)
        }
    }

    private static func append<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    static func read<T: FixedWidthInteger>(_: T.Type, _ bytes: [UInt8], at offset: Int) -> T {
        var value: T = 0
        for index in 0..<MemoryLayout<T>.size { value = value << 8 | T(bytes[offset + index]) }
        return value
    }
}
