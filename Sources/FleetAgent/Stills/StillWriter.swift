import FleetCapture
import FleetCore
import FleetImaging
import FleetProtocol
import FleetRecording
import FleetSystem
import Foundation

/// Who and what a still's pictures are of, for their sidecars.
struct StillSubject: Sendable {
    let stillID: String
    let deviceID: String
    let deviceName: String
    let nodeID: String
    let nodeName: String
    let jpeg: Bool
    let jpegQuality: Int
    let zoomMethod: String
    let focus: FocusState?
    let consent: ConsentState
    let clockSync: String
}

/// Writes stills' pictures on this host (stills.md, "Where pictures are written"): PNG (16-bit
/// grey for formats of more than 8 bits) or JPEG, each with its JSON sidecar, under
/// `<recordings_dir>/stills/<still id>/`, made durable and checksummed before the coordinator
/// hears of them; and serves and removes them for the coordinator's copy. Encoding a 16-MP
/// frame takes a while: it runs on a thread of its own, never the camera's.
final class StillWriter: Sendable {
    let directory: String
    private let worker: OwnedWorker<@Sendable () -> Void>

    init(directory: String) {
        self.directory = directory
        worker = OwnedWorker(name: "cf-stills", handle: { job in job() })
    }

    func stop() async { await worker.stop() }

    /// Encodes and writes `taken`'s pictures; `done` gets them as the coordinator indexes them.
    /// A manifest of them stays beside them until the coordinator's index acknowledges them,
    /// so an answer that came too late (or a coordinator that restarted) loses nothing: the
    /// recordings link reports them until then (`held`, `acknowledged`).
    func write(_ taken: StillTaken, of subject: StillSubject, done: @escaping @Sendable (Result<[Capfleet_V1_StillImage], StillFailure>) -> Void) {
        let posted = worker.post { [self] in
            done(
                Result { () throws(StillFailure) in
                    var images: [Capfleet_V1_StillImage] = []
                    for (index, picture) in taken.pictures.enumerated() {
                        images.append(try write(picture, number: index + 1, of: taken, subject: subject))
                    }
                    let manifest = Capfleet_V1_StillCaptured.with {
                        $0.images = images
                        $0.awayNs = taken.awayNanoseconds
                        $0.stillFormatIndex = UInt32(taken.stillFormatIndex)
                        $0.streamingFormatIndex = UInt32(taken.streamingFormatIndex)
                    }
                    let path = manifestPath(stillID: subject.stillID, deviceID: subject.deviceID)
                    do {
                        try Self.writeDurably(Array(try manifest.serializedBytes() as [UInt8]), to: path)
                    } catch let error as SystemCallError {
                        throw StillFailure("cannot write \(path): \(error)")
                    } catch {
                        throw StillFailure("cannot write \(path): \(error)")
                    }
                    return images
                })
        }
        if !posted { done(.failure(StillFailure("the agent is stopping", unavailable: true))) }
    }

    /// The picture's file on this host, if it is here.
    func path(stillID: String, deviceID: String, number: Int) -> String? {
        guard Self.isSafeName(stillID), Self.isSafeName(deviceID) else { return nil }
        for ext in ["png", "jpg"] {
            let path = "\(directory)/\(stillID)/\(deviceID)-\(number).\(ext)"
            if access(path, F_OK) == 0 { return path }
        }
        return nil
    }

    /// The coordinator holds a verified copy: the picture and its sidecar go, the manifest with
    /// the camera's last picture, and the still's directory with the last of them. Returns
    /// what could not be removed.
    func remove(stillID: String, deviceID: String, number: Int) -> String? {
        guard let path = path(stillID: stillID, deviceID: deviceID, number: number) else { return nil }
        let sidecar = (path as NSString).deletingPathExtension + ".json"
        for file in [path, sidecar] where unlink(file) != 0 && errno != ENOENT {
            return "cannot remove \(file): \(String(cString: strerror(errno)))"
        }
        let folder = "\(directory)/\(stillID)"
        let left = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        if !left.contains(where: { $0.hasPrefix(deviceID + "-") && ($0.hasSuffix(".png") || $0.hasSuffix(".jpg")) }) {
            acknowledged(stillID: stillID, deviceID: deviceID)
        }
        rmdir(folder)  // only when empty; another camera's pictures may remain
        return nil
    }

    /// The still was deleted: every picture of the camera goes (up to a bracket's 16).
    func removeAll(stillID: String, deviceID: String) -> String? {
        for number in 1...16 {
            if let problem = remove(stillID: stillID, deviceID: deviceID, number: number) { return problem }
        }
        acknowledged(stillID: stillID, deviceID: deviceID)
        rmdir("\(directory)/\(stillID)")
        return nil
    }

    private func manifestPath(stillID: String, deviceID: String) -> String {
        "\(directory)/\(stillID)/\(deviceID).held.pb"
    }

    /// The pictures written here that the coordinator's index has not acknowledged, by still
    /// and device, as written (pictures since removed are left out).
    func held() -> [(stillID: String, deviceID: String, captured: Capfleet_V1_StillCaptured)] {
        var found: [(String, String, Capfleet_V1_StillCaptured)] = []
        for stillID in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where Self.isSafeName(stillID) {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: "\(directory)/\(stillID)")) ?? [] where name.hasSuffix(".held.pb") {
                let deviceID = String(name.dropLast(".held.pb".count))
                guard let data = FileManager.default.contents(atPath: "\(directory)/\(stillID)/\(name)"),
                    var captured = try? Capfleet_V1_StillCaptured(serializedBytes: data)
                else { continue }
                captured.images = captured.images.filter { access($0.path, F_OK) == 0 }
                found.append((stillID, deviceID, captured))
            }
        }
        return found
    }

    /// The coordinator's index holds the camera's pictures: nothing more to report.
    func acknowledged(stillID: String, deviceID: String) {
        guard Self.isSafeName(stillID), Self.isSafeName(deviceID) else { return }
        unlink(manifestPath(stillID: stillID, deviceID: deviceID))
    }

    // MARK: The writer's thread

    private func write(
        _ picture: StillTaken.Picture, number: Int, of taken: StillTaken, subject: StillSubject
    ) throws(StillFailure) -> Capfleet_V1_StillImage {
        guard Self.isSafeName(subject.stillID), Self.isSafeName(subject.deviceID) else {
            throw StillFailure("still id \(subject.stillID) or device id \(subject.deviceID) is not a safe file name")
        }
        let frame = picture.frame
        let encoded = try encode(frame, format: taken.stillFormat, subject: subject)
        let folder = "\(directory)/\(subject.stillID)"
        let base = "\(subject.deviceID)-\(number)"
        let path = "\(folder)/\(base).\(encoded.fileExtension)"
        let sidecarPath = "\(folder)/\(base).json"
        let spread = Int64(bitPattern: frame.fleetTime &- picture.requestedFleetTime)
        let sidecar = StillSidecar(
            still_id: subject.stillID, number: number, file: "\(base).\(encoded.fileExtension)", media_type: encoded.mediaType,
            bits_per_sample: encoded.bitsPerSample, device_id: subject.deviceID, device_name: subject.deviceName, node_id: subject.nodeID,
            node_name: subject.nodeName, requested_fleet_ns: picture.requestedFleetTime, fleet_time_ns: frame.fleetTime,
            fleet_time_uncertainty_ns: frame.uncertainty, capture_local_ns: frame.captureLocal, spread_ns: spread, sequence: frame.sequence,
            clock_sync: subject.clockSync,
            format: .init(
                pixel_format: frame.layout.pixelFormat.fourCC, width: frame.layout.width, height: frame.layout.height,
                bit_depth: taken.stillFormat.bitDepth, frame_rate: taken.frameRate, format_index: taken.stillFormatIndex,
                colour: taken.stillFormat.colour?.description, depth_unit_metres: taken.stillFormat.depthUnitMetres),
            away_from_streaming_ns: taken.awayNanoseconds, ev: picture.ev,
            exposure: picture.exposure.map { .init(automatic: $0.automatic, seconds: $0.seconds) },
            zoom: .init(factor: frame.zoomFactor, method: subject.zoomMethod),
            focus: subject.focus.map { .init(mode: $0.mode.rawValue, lens_position: $0.lensPosition) },
            consent: subject.consent.rawValue, software_version: WireDefaults.release)
        let sidecarBytes: [UInt8]
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            sidecarBytes = Array(try encoder.encode(sidecar)) + [0x0A]
        } catch {
            throw StillFailure("cannot make the sidecar of \(path): \(error)")
        }
        let sha: String
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            try Self.writeDurably(encoded.bytes, to: path)
            try Self.writeDurably(sidecarBytes, to: sidecarPath)
            sha = try SegmentDigest.sha256(ofFile: path)
        } catch let error as SystemCallError {
            throw StillFailure("cannot write \(path): \(error)")
        } catch {
            throw StillFailure("cannot write \(path): \(error)")
        }
        return .with {
            $0.number = UInt32(number)
            $0.path = path
            $0.sizeBytes = UInt64(encoded.bytes.count)
            $0.sha256 = sha
            $0.mediaType = encoded.mediaType
            $0.sidecarJson = String(decoding: sidecarBytes, as: UTF8.self)
            $0.requestedFleetNs = picture.requestedFleetTime
            $0.fleetTimeNs = frame.fleetTime
            $0.uncertaintyNs = frame.uncertainty
            $0.spreadNs = spread
            $0.sequence = frame.sequence
            $0.layout = frame.layout.wire
            $0.bitDepth = UInt32(taken.stillFormat.bitDepth)
            $0.exposureSeconds = picture.exposure?.seconds ?? 0
            $0.exposureAutomatic = picture.exposure?.automatic ?? false
            $0.ev = picture.ev
        }
    }

    private struct Encoded {
        let bytes: [UInt8]
        let fileExtension: String
        let mediaType: String
        let bitsPerSample: Int
    }

    /// JPEG on request (a camera's own JPEG as it is: no second loss); otherwise PNG, 16-bit
    /// grey where the format carries more than 8 bits of grey, else 8-bit RGB.
    private func encode(_ frame: StillFrame, format: VideoFormat, subject: StillSubject) throws(StillFailure) -> Encoded {
        let pixelFormat = frame.layout.pixelFormat
        let bytes = UnsafeRawBufferPointer(start: frame.pixels.storage, count: frame.byteCount)
        let raw = RawFrame(bytes: bytes, pixelFormat: pixelFormat, width: frame.layout.width, height: frame.layout.height)
        do {
            if subject.jpeg {
                if pixelFormat.isJPEG { return Encoded(bytes: Array(bytes), fileExtension: "jpg", mediaType: "image/jpeg", bitsPerSample: 8) }
                let picture = try withExtendedLifetime(frame.pixels) { () throws(ImagingError) in try FrameRenderer().picture(of: raw) }
                return Encoded(
                    bytes: try JPEGEncoder().encode(picture, quality: subject.jpegQuality), fileExtension: "jpg",
                    mediaType: "image/jpeg", bitsPerSample: 8)
            }
            if format.bitDepth > 8, let wordBits = pixelFormat.greyWordBits {
                let grey = try withExtendedLifetime(frame.pixels) { () throws(ImagingError) in
                    try Self.grey16(bytes, width: frame.layout.width, height: frame.layout.height, wordBits: wordBits, bitDepth: format.bitDepth)
                }
                return Encoded(bytes: grey, fileExtension: "png", mediaType: "image/png", bitsPerSample: 16)
            }
            let picture = try withExtendedLifetime(frame.pixels) { () throws(ImagingError) in try FrameRenderer().picture(of: raw) }
            return Encoded(bytes: try PNGEncoder.encode(picture), fileExtension: "png", mediaType: "image/png", bitsPerSample: 8)
        } catch {
            throw StillFailure("cannot encode \(subject.deviceID)'s \(frame.layout.width)x\(frame.layout.height) \(pixelFormat) frame: \(error)")
        }
    }

    /// A 16-bit grey PNG of Y10/Y12/Y16 samples: PNG wants them in the high bits, where a
    /// Y16 word has them already (its sensor's depth said with sBIT); Y10 and Y12 keep theirs
    /// in the low bits and are shifted up.
    private static func grey16(
        _ bytes: UnsafeRawBufferPointer, width: Int, height: Int, wordBits: Int,
        bitDepth: Int
    ) throws(ImagingError) -> [UInt8] {
        guard wordBits < 16 else {
            return try PNGEncoder.encodeGrey16(width: width, height: height, littleEndianSamples: bytes, significantBits: min(max(bitDepth, 1), 16))
        }
        let count = min(bytes.count / 2, width * height)
        var shifted = [UInt8](repeating: 0, count: width * height * 2)
        for index in 0..<count {
            let sample = (UInt16(bytes[index * 2]) | UInt16(bytes[index * 2 + 1]) << 8) << UInt16(16 - wordBits)
            shifted[index * 2] = UInt8(sample & 0xFF)
            shifted[index * 2 + 1] = UInt8(sample >> 8)
        }
        let encoded = shifted.withUnsafeBytes { samples in
            Result { () throws(ImagingError) in
                try PNGEncoder.encodeGrey16(width: width, height: height, littleEndianSamples: samples, significantBits: wordBits)
            }
        }
        return try encoded.get()
    }

    /// Written under a temporary name, flushed, then renamed: a crash leaves the whole file or none.
    private static func writeDurably(_ bytes: [UInt8], to path: String) throws(SystemCallError) {
        let temporary = path + ".partial"
        let fd = try systemCall("open", on: temporary) { open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) }
        defer { close(fd) }
        var done = 0
        while done < bytes.count {
            let n = try systemCall("write", on: temporary) { bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, bytes.count - done) } }
            done += n
        }
        _ = try systemCall("fsync", on: temporary) { fsync(fd) }
        _ = try systemCall("rename", on: path) { rename(temporary, path) }
    }

    /// Ids become file names: no separators, no dot files.
    static func isSafeName(_ name: String) -> Bool {
        !name.isEmpty && !name.hasPrefix(".") && !name.contains("/") && !name.contains("\0")
    }
}

/// The JSON beside each picture (stills.md, "The sidecar"); field names are the contract.
struct StillSidecar: Codable, Sendable {
    struct Format: Codable, Sendable {
        var pixel_format: String
        var width, height, bit_depth: Int
        var frame_rate: Double
        var format_index: Int
        /// `primaries/transfer/matrix/range` where the format declares it.
        var colour: String?
        /// A depth still's (Z16) metres per unit of its 16-bit samples.
        var depth_unit_metres: Double?
    }

    struct Exposure: Codable, Sendable {
        var automatic: Bool
        var seconds: Double
    }

    struct Zoom: Codable, Sendable {
        var factor: Double
        var method: String
    }

    struct Focus: Codable, Sendable {
        var mode: String
        var lens_position: Double?
    }

    var still_id: String
    var number: Int
    var file: String
    var media_type: String
    var bits_per_sample: Int
    var device_id, device_name, node_id, node_name: String
    var requested_fleet_ns, fleet_time_ns, fleet_time_uncertainty_ns, capture_local_ns: UInt64
    var spread_ns: Int64
    var sequence: UInt64
    var clock_sync: String
    var format: Format
    var away_from_streaming_ns: UInt64
    var ev: Double
    var exposure: Exposure?
    var zoom: Zoom
    var focus: Focus?
    var consent: String
    var software_version: String
}
