import FleetCapture
import FleetCore
import FleetDetection
import FleetProtocol
import FleetSystem
import Foundation
import Logging
import Synchronization

/// One camera's detection of codes and faces (detection.md), on a thread of its own: the
/// capture thread only checks whether a frame is due (the rate) and the thread idle, and if so
/// copies the frame's pixels and hands them over; a due frame that finds the thread busy is
/// skipped and counted, never queued, so detection never holds up capture or the frame path.
final class DeviceDetection: Sendable {
    let deviceID: String
    private struct Wanted {
        var settings = DetectionSettings.off
        /// Bumped on every change: the tracker starts over.
        var generation = 0
        var lastExamined: UInt64 = 0
    }

    private let wanted = Mutex(Wanted())
    /// What the capture thread and the detection thread both touch.
    private final class Shared: Sendable {
        let busy = Atomic<Bool>(false)
        let examined = Atomic<UInt64>(0)
        let skipped = Atomic<UInt64>(0)
        let skippedSinceReport = Atomic<UInt64>(0)
        /// Where reports go (the stream checks consent and sends them on); set once by the stream.
        let sink = Mutex<(@Sendable (Capfleet_V1_DetectionReport) -> Void)?>(nil)
        /// Auto-framing (detection.md, "Auto-framing"): faces in from the detection thread,
        /// the crop out to every frame on the capture thread; nil while framing is off or the
        /// format too narrow for it.
        let framer = Mutex<(framer: AutoFramer, generation: Int)?>(nil)
    }

    private let shared: Shared
    private let worker: OwnedWorker<Job>

    /// Frames examined, and due frames skipped because the detection thread was busy.
    var examined: UInt64 { shared.examined.load(ordering: .relaxed) }
    var skipped: UInt64 { shared.skipped.load(ordering: .relaxed) }

    struct Job: Sendable {
        let pixels: FrameBuffer
        let layout: FrameLayout
        let sequence: UInt64
        let captureLocal: UInt64
        let captureMonotonic: UInt64
        let fleetTime: UInt64?
        let nodeID: String
        let settings: DetectionSettings
        let generation: Int
        /// The window of the camera's whole view this frame shows (framing with its optics:
        /// faces found in it are placed in the whole view); the whole view otherwise.
        let view: NormalizedRect
    }

    init(deviceID: String, logger: Logger) {
        self.deviceID = deviceID
        let shared = Shared()
        self.shared = shared
        worker = OwnedWorker(
            name: "cf-detect", capacity: 1, state: { DetectorState(deviceID: deviceID, logger: logger) },
            handle: { state, job in
                defer { shared.busy.store(false, ordering: .releasing) }
                let report = state.examine(job)
                shared.examined.add(1, ordering: .relaxed)
                if job.settings.framing != nil, let faces = state.faceBoxes {
                    let placed = faces.map { job.view.placing($0) }
                    shared.framer.withLock { held in
                        guard held?.generation == job.generation else { return }
                        held?.framer.observe(faces: placed, at: job.captureMonotonic)
                    }
                }
                guard var sent = report else { return }
                sent.examinedFrames = shared.examined.load(ordering: .relaxed)
                sent.skippedFrames = shared.skippedSinceReport.exchange(0, ordering: .relaxed)
                if let deliver = shared.sink.withLock({ $0 }) { deliver(sent) }
            })
    }

    func deliver(to sink: @escaping @Sendable (Capfleet_V1_DetectionReport) -> Void) { shared.sink.withLock { $0 = sink } }

    var settings: DetectionSettings { wanted.withLock { $0.settings } }

    /// Checks the detectors can be made (a cascade file missing is said now, in the answer to
    /// the command), then applies the settings from the next frame on.
    func apply(_ settings: DetectionSettings) throws(DetectionError) {
        if let problem = settings.problem { throw .scanFailed(problem.description) }
        // The detection thread loads the detectors; here only what can be checked at once.
        if settings.faces, let problem = FaceDetector.cascadeProblem() { throw problem }
        if !settings.codes.isEmpty { _ = try BarcodeScanner(symbologies: settings.codes) }
        wanted.withLock {
            $0.settings = settings
            $0.generation += 1
            $0.lastExamined = 0
        }
        shared.framer.withLock { $0 = nil }
    }

    /// Whether framing now steers the camera's own zoom, pan and tilt.
    var framesWithOptics: Bool { wanted.withLock { $0.settings.framing?.optics == true } }

    /// On the capture thread, for every frame while framing is on: where its crop is (the
    /// frame's metadata, so a take can be reframed or un-framed later), and, framing with the
    /// camera's optics (`optics`: its view now), where to point them next, the frame's crop
    /// then being the window it shows. Inactive, the whole frame, on a format narrower than
    /// framing with a crop needs.
    func framing(for frame: CapturedFrame, optics: OpticalView?) -> (state: Capfleet_V1_FramingState, aim: OpticalPointing?)? {
        let (settings, generation) = wanted.withLock { ($0.settings.framing, $0.generation) }
        guard let settings else { return nil }
        let optical = settings.optics ? optics : nil
        if settings.optics, optical == nil { return nil }
        let crop: NormalizedRect = shared.framer.withLock { held in
            guard optical != nil || frame.layout.width >= FramingSettings.minimumFormatWidth else {
                held = nil
                return .whole
            }
            let aspect = Double(frame.layout.width) / Double(max(frame.layout.height, 1))
            if held == nil || held?.generation != generation || held?.framer.aspect != aspect {
                held = (AutoFramer(settings: settings, width: frame.layout.width, height: frame.layout.height), generation)
            }
            return held!.framer.advance(to: frame.captureMonotonicNanoseconds)
        }
        guard let optical else {
            let state = Capfleet_V1_FramingState.with {
                $0.active = crop != .whole
                $0.crop = crop.wire
            }
            return (state, nil)
        }
        let shown = optical.window(zoom: frame.zoomFactor, pan: frame.pan, tilt: frame.tilt)
        let state = Capfleet_V1_FramingState.with {
            $0.active = shown.width < 1 - 1e-4
            $0.crop = shown.wire
            $0.optical = true
        }
        return (state, optical.pointing(showing: crop))
    }

    /// On the capture thread, for a real frame (never a black one): hands it over if it is due
    /// and the detection thread is free.
    func offer(_ frame: CapturedFrame, captureLocal: UInt64, fleetTime: UInt64?, nodeID: String, view: NormalizedRect = .whole) {
        let due: (DetectionSettings, Int)? = wanted.withLock { wanted in
            guard wanted.settings.isOn else { return nil }
            let interval = UInt64(1e9 / wanted.settings.framesPerSecond)
            guard wanted.lastExamined == 0 || frame.captureMonotonicNanoseconds &- wanted.lastExamined >= interval else { return nil }
            wanted.lastExamined = frame.captureMonotonicNanoseconds
            return (wanted.settings, wanted.generation)
        }
        guard let (settings, generation) = due else { return }
        guard !shared.busy.exchange(true, ordering: .acquiringAndReleasing) else {
            shared.skipped.add(1, ordering: .relaxed)
            shared.skippedSinceReport.add(1, ordering: .relaxed)
            return
        }
        let copy = FrameBuffer(unpooledCapacity: frame.byteCount)
        copy.storage.copyMemory(from: frame.buffer.storage, byteCount: frame.byteCount)
        let job = Job(
            pixels: copy, layout: frame.layout, sequence: frame.sequence, captureLocal: captureLocal,
            captureMonotonic: frame.captureMonotonicNanoseconds, fleetTime: fleetTime,
            nodeID: nodeID, settings: settings, generation: generation, view: view)
        if !worker.post(job) { shared.busy.store(false, ordering: .releasing) }
    }

    func stop() async { await worker.stop() }
}

/// The detection thread's own: the detectors for the current settings and the face tracker.
private struct DetectorState {
    let deviceID: String
    let logger: Logger
    var generation = -1
    var scanner: BarcodeScanner?
    var faces: FaceDetector?
    var tracker = FaceTracker()
    /// Kept across changes of settings: objects a narrower region leaves out are gone too.
    var gate = DetectionReportGate()
    var unsupportedFormatSaid = false
    /// The boxes of the faces found in the frame last examined; nil when faces are not looked for
    /// or it could not be read.
    var faceBoxes: [NormalizedRect]?

    init(deviceID: String, logger: Logger) {
        self.deviceID = deviceID
        self.logger = logger
    }

    mutating func examine(_ job: DeviceDetection.Job) -> Capfleet_V1_DetectionReport? {
        faceBoxes = nil
        if job.generation != generation {
            generation = job.generation
            tracker.reset()
            do {
                scanner = job.settings.codes.isEmpty ? nil : try BarcodeScanner(symbologies: job.settings.codes)
                faces = job.settings.faces ? try FaceDetector() : nil
            } catch {
                logger.error("detection cannot start", metadata: ["device.id": "\(deviceID)", "error": "\(error)"])
                scanner = nil
                faces = nil
            }
        }
        guard let luma = LumaPlane(base: job.pixels.storage, pixelFormat: job.layout.pixelFormat, width: job.layout.width, height: job.layout.height),
            let image = GreyImage(luma: luma)
        else {
            if !unsupportedFormatSaid {
                unsupportedFormatSaid = true
                logger.warning(
                    "detection skips this format: no luma plane to read",
                    metadata: ["device.id": "\(deviceID)", "format": "\(job.layout.pixelFormat)"])
            }
            return nil
        }
        var objects: [Capfleet_V1_DetectedObject] = []
        do {
            for code in try scanner?.scan(image, region: job.settings.region) ?? [] {
                objects.append(
                    .with {
                        $0.kind = .code
                        $0.symbology = code.symbology.rawValue
                        $0.value = code.value
                        $0.corners = code.corners.map { point in
                            .with {
                                $0.x = point.x; $0.y = point.y
                            }
                        }
                        $0.bounds = code.bounds.wire
                    })
            }
            if let faces {
                var boxes: [NormalizedRect] = []
                defer { faceBoxes = boxes }
                for face in tracker.update(try faces.detect(image, region: job.settings.region)) {
                    boxes.append(face.box)
                    objects.append(
                        .with {
                            $0.kind = .face
                            $0.faceID = face.id
                            $0.bounds = face.box.wire
                        })
                }
            }
        } catch {
            logger.error("detection failed on a frame", metadata: ["device.id": "\(deviceID)", "error": "\(error)"])
            return nil
        }
        guard gate.shouldReport(objectCount: objects.count) else { return nil }
        return .with {
            $0.nodeID = job.nodeID
            $0.deviceID = deviceID
            $0.sequence = job.sequence
            $0.captureLocalNs = job.captureLocal
            $0.fleetTimeNs = job.fleetTime ?? 0
            $0.frameWidth = UInt32(job.layout.width)
            $0.frameHeight = UInt32(job.layout.height)
            $0.objects = objects
        }
    }
}
