import CV4L2
import Foundation
import Glibc
import Synchronization

/// A raw sensor's frame timing through its V4L2 sub-device: a frame lasts (height + VBLANK)
/// lines of (width + HBLANK) / PIXEL_RATE, and VBLANK can be set while it streams. This is
/// what lets a V4L2 camera be steered onto the fleet grid (`FramePhaseLoop`), as libcamera's
/// and rpicam's sync steer frame durations; a camera found without one is free-running, and
/// `V4L2SensorTiming.find` says why.
final class V4L2SensorTiming: Sendable {
    let sensorName: String
    let subdevicePath: String
    /// Active lines and pixels of the sensor's output.
    let width: Int
    let height: Int
    let horizontalBlanking: Int
    let pixelRate: UInt64
    let verticalBlankingRange: ClosedRange<Int>
    private let handle: Mutex<V4L2Handle>
    /// The latest VBLANK write that failed, so that a sensor refusing to be steered says so.
    private let failure = Mutex<V4L2Error?>(nil)

    /// Nanoseconds a line lasts on a perfect pixel clock.
    var nominalLineTime: Double { Double(width + horizontalBlanking) * 1e9 / Double(pixelRate) }
    var frameLengthRange: ClosedRange<Int> {
        (height + verticalBlankingRange.lowerBound)...(height + verticalBlankingRange.upperBound)
    }

    func timing(at frameRate: Double) -> FrameLengthTiming {
        let range = frameLengthRange
        let wanted = Int((1e9 / max(frameRate, 0.1) / nominalLineTime).rounded())
        return FrameLengthTiming(
            nominalLineTime: nominalLineTime, frameLengthRange: range, nominalFrameLength: min(max(wanted, range.lowerBound), range.upperBound))
    }

    /// Sets VBLANK for a frame of `lines`: an ioctl on the sub-device, which the sensor latches
    /// at its next frame start. A refusal is kept (`lastFailure`), not thrown: the capture
    /// thread calling it goes on with the frame length the sensor has.
    func setFrameLength(lines: Int) {
        let blanking = min(max(lines - height, verticalBlankingRange.lowerBound), verticalBlankingRange.upperBound)
        var control = v4l2_control(id: CAPFLEET_V4L2_CID_VBLANK, value: Int32(blanking))
        let error = handle.withLock { handle -> V4L2Error? in
            do throws(V4L2Error) {
                try handle.ioctl(CAPFLEET_VIDIOC_S_CTRL, &control, "VIDIOC_S_CTRL(VBLANK)")
                return nil
            } catch {
                return error
            }
        }
        failure.withLock { $0 = error }
    }

    var lastFailure: V4L2Error? { failure.withLock { $0 } }

    private init(
        sensorName: String, subdevicePath: String, handle: sending V4L2Handle, width: Int, height: Int, horizontalBlanking: Int, pixelRate: UInt64,
        verticalBlankingRange: ClosedRange<Int>
    ) {
        self.sensorName = sensorName
        self.subdevicePath = subdevicePath
        self.handle = Mutex(handle)
        self.width = width
        self.height = height
        self.horizontalBlanking = horizontalBlanking
        self.pixelRate = pixelRate
        self.verticalBlankingRange = verticalBlankingRange
    }

    /// The sensor that feeds `videoPath`, through every media controller of the host, with the
    /// controls that time it; or why the camera cannot be steered, for its alignment report.
    static func find(for videoPath: String, mediaDevices: [String]) -> Result<V4L2SensorTiming, SteeringUnavailable> {
        var status = stat()
        guard stat(videoPath, &status) == 0 else { return .failure(.init("cannot stat \(videoPath): \(String(cString: strerror(errno)))")) }
        let video = deviceNumber(status.st_rdev)
        guard !mediaDevices.isEmpty else {
            return .failure(.init("no media controller on this host: its driver times the frames (a webcam or vivid), free-running"))
        }
        var reasons: [String] = []
        for path in mediaDevices {
            let graph: MediaGraph
            do throws(V4L2Error) {
                graph = try topology(of: path)
            } catch {
                reasons.append("\(error)")
                continue
            }
            switch graph.sensor(
                feeding: video, sensorFunction: CAPFLEET_MEDIA_ENT_F_CAM_SENSOR, videoType: CAPFLEET_MEDIA_INTF_T_V4L_VIDEO,
                subdeviceType: CAPFLEET_MEDIA_INTF_T_V4L_SUBDEV)
            {
            case .notHere:
                continue
            case let .noSensor(reason):
                return .failure(.init("\(path): \(reason)"))
            case let .found(sensor, subdevice):
                return open(sensor: sensor.name, subdevice: subdevice)
            }
        }
        return .failure(
            .init(
                "\(videoPath) is on none of the host's media controllers (\(mediaDevices.joined(separator: ", ")))"
                    + (reasons.isEmpty ? "" : "; " + reasons.joined(separator: "; "))))
    }

    /// Opens the sensor's sub-device and reads what times its frames.
    private static func open(sensor: String, subdevice: MediaGraph.DeviceNumber) -> Result<V4L2SensorTiming, SteeringUnavailable> {
        guard let path = devicePath(of: subdevice) else {
            return .failure(.init("the sensor \(sensor)'s sub-device \(subdevice) has no node in /dev"))
        }
        let handle: V4L2Handle
        do throws(V4L2Error) {
            handle = try V4L2Handle(path: path, throughLibV4L2: false)
        } catch {
            return .failure(.init("the sensor \(sensor): \(error)"))
        }
        var format = v4l2_subdev_format()
        format.which = CAPFLEET_V4L2_SUBDEV_FORMAT_ACTIVE
        format.pad = 0
        if let error = handle.attempt(CAPFLEET_VIDIOC_SUBDEV_G_FMT, &format) {
            return .failure(.init("the sensor \(sensor) (\(path)) does not tell its format: \(String(cString: strerror(error)))"))
        }
        guard let vertical = range(of: CAPFLEET_V4L2_CID_VBLANK, on: handle), vertical.flags & UInt32(V4L2_CTRL_FLAG_READ_ONLY) == 0 else {
            return .failure(.init("the sensor \(sensor) (\(path)) has no VBLANK control it lets us set: its frame length is fixed"))
        }
        guard let horizontal = value(of: CAPFLEET_V4L2_CID_HBLANK, on: handle),
            let rate = value(of: CAPFLEET_V4L2_CID_PIXEL_RATE, on: handle), rate > 0
        else {
            return .failure(.init("the sensor \(sensor) (\(path)) does not give HBLANK and PIXEL_RATE, so its line time is unknown"))
        }
        return .success(
            V4L2SensorTiming(
                sensorName: sensor, subdevicePath: path, handle: handle, width: Int(format.format.width), height: Int(format.format.height),
                horizontalBlanking: Int(horizontal), pixelRate: UInt64(rate),
                verticalBlankingRange: Int(vertical.minimum)...Int(max(vertical.minimum, vertical.maximum))))
    }

    private static func range(of id: UInt32, on handle: V4L2Handle) -> v4l2_query_ext_ctrl? {
        var query = v4l2_query_ext_ctrl()
        query.id = id
        return handle.attempt(CAPFLEET_VIDIOC_QUERY_EXT_CTRL, &query) == nil ? query : nil
    }

    /// A control's value, 64-bit ones (PIXEL_RATE) included.
    private static func value(of id: UInt32, on handle: V4L2Handle) -> Int64? {
        var control = v4l2_ext_control()
        control.id = id
        return withUnsafeMutablePointer(to: &control) { pointer -> Int64? in
            var controls = v4l2_ext_controls()
            controls.which = UInt32(V4L2_CTRL_WHICH_CUR_VAL)
            controls.count = 1
            controls.controls = pointer
            guard handle.attempt(CAPFLEET_VIDIOC_G_EXT_CTRLS, &controls) == nil else { return nil }
            return pointer.pointee.value64
        }
    }

    /// The media controller's graph, asked twice: once for the counts, once for the arrays.
    static func topology(of path: String) throws(V4L2Error) -> MediaGraph {
        let handle = try V4L2Handle(path: path, throughLibV4L2: false)
        var topology = media_v2_topology()
        try handle.ioctl(CAPFLEET_MEDIA_IOC_G_TOPOLOGY, &topology, "MEDIA_IOC_G_TOPOLOGY")
        var entities = [media_v2_entity](repeating: media_v2_entity(), count: Int(topology.num_entities))
        var interfaces = [media_v2_interface](repeating: media_v2_interface(), count: Int(topology.num_interfaces))
        var pads = [media_v2_pad](repeating: media_v2_pad(), count: Int(topology.num_pads))
        var links = [media_v2_link](repeating: media_v2_link(), count: Int(topology.num_links))
        try entities.withUnsafeMutableBufferPointer { entityBuffer throws(V4L2Error) in
            try interfaces.withUnsafeMutableBufferPointer { interfaceBuffer throws(V4L2Error) in
                try pads.withUnsafeMutableBufferPointer { padBuffer throws(V4L2Error) in
                    try links.withUnsafeMutableBufferPointer { linkBuffer throws(V4L2Error) in
                        topology.ptr_entities = UInt64(UInt(bitPattern: entityBuffer.baseAddress))
                        topology.ptr_interfaces = UInt64(UInt(bitPattern: interfaceBuffer.baseAddress))
                        topology.ptr_pads = UInt64(UInt(bitPattern: padBuffer.baseAddress))
                        topology.ptr_links = UInt64(UInt(bitPattern: linkBuffer.baseAddress))
                        try handle.ioctl(CAPFLEET_MEDIA_IOC_G_TOPOLOGY, &topology, "MEDIA_IOC_G_TOPOLOGY")
                    }
                }
            }
        }
        // A graph that grew between the two calls is read as far as the arrays go.
        return MediaGraph(
            entities: entities.prefix(Int(topology.num_entities)).map {
                .init(id: $0.id, name: fixedString($0.name), function: $0.function)
            },
            interfaces: interfaces.prefix(Int(topology.num_interfaces)).map {
                .init(id: $0.id, type: $0.intf_type, device: .init(major: $0.devnode.major, minor: $0.devnode.minor))
            },
            pads: pads.prefix(Int(topology.num_pads)).map {
                .init(id: $0.id, entityID: $0.entity_id, isSink: $0.flags & CAPFLEET_MEDIA_PAD_FL_SINK != 0)
            },
            links: links.prefix(Int(topology.num_links)).map {
                .init(
                    source: $0.source_id, sink: $0.sink_id,
                    isInterfaceLink: $0.flags & CAPFLEET_MEDIA_LNK_FL_LINK_TYPE == CAPFLEET_MEDIA_LNK_FL_INTERFACE_LINK,
                    isEnabled: $0.flags & CAPFLEET_MEDIA_LNK_FL_ENABLED != 0)
            })
    }

    /// The media controllers' nodes (`/dev/media0` ...); none where the folder cannot be read.
    static func mediaDevicePaths(in devRoot: String = "/dev") -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: devRoot)) ?? []
        return names.filter { $0.hasPrefix("media") && Int($0.dropFirst(5)) != nil }.sorted().map { devRoot + "/" + $0 }
    }

    /// glibc's major() and minor(), which Swift does not import.
    static func deviceNumber(_ device: dev_t) -> MediaGraph.DeviceNumber {
        let value = UInt64(device)
        return .init(
            major: UInt32(truncatingIfNeeded: ((value >> 8) & 0xfff) | ((value >> 32) & ~0xfff)),
            minor: UInt32(truncatingIfNeeded: (value & 0xff) | ((value >> 12) & ~0xff)))
    }

    /// /dev/NAME of a character device, from sysfs (`/sys/dev/char/MAJOR:MINOR/uevent`).
    static func devicePath(of device: MediaGraph.DeviceNumber) -> String? {
        guard let uevent = try? String(contentsOfFile: "/sys/dev/char/\(device)/uevent", encoding: .utf8) else { return nil }
        return uevent.split(separator: "\n").first { $0.hasPrefix("DEVNAME=") }.map { "/dev/" + $0.dropFirst(8) }
    }
}

/// Why a camera cannot be steered onto the grid, in words for its alignment report.
struct SteeringUnavailable: Error, Sendable, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
