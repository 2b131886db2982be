import CV4L2
import FleetCore

/// Reads a device's whole format list: every pixel format (VIDIOC_ENUM_FMT), every size
/// (VIDIOC_ENUM_FRAMESIZES: discrete, stepwise, continuous) and every frame interval
/// (VIDIOC_ENUM_FRAMEINTERVALS: discrete and ranges), into the fleet's format model.
/// Formats libv4l2 only emulates by converting are left out: the list is the device's own.
enum V4L2FormatEnumeration {
    static func formats(of handle: V4L2Handle, zoom: ZoomCapability) -> [VideoFormat] {
        var formats: [VideoFormat] = []
        for pixelFormat in pixelFormats(of: handle) {
            for size in sizes(of: handle, pixelFormat: pixelFormat) {
                var ranges = frameRates(of: handle, pixelFormat: pixelFormat, width: size.width, height: size.height)
                if ranges.isEmpty, let current = currentFrameRate(of: handle) { ranges = [FrameRateRange(min: current, max: current)] }
                let limits = zoom.limits(forWidth: size.width)
                let fourCC = PixelFormat(v4l2Code: pixelFormat)
                formats.append(
                    VideoFormat(
                        pixelFormat: fourCC, width: size.width, height: size.height, frameRateRanges: ranges,
                        fieldOfViewDegrees: nil, maxZoomFactor: limits.maximum, upscaleThresholdZoomFactor: limits.upscaleThreshold,
                        bitDepth: fourCC.nominalBitDepth))
            }
        }
        return formats
    }

    static func pixelFormats(of handle: V4L2Handle) -> [UInt32] {
        var codes: [UInt32] = []
        for index in 0..<UInt32(512) {
            var description = v4l2_fmtdesc()
            description.index = index
            description.type = CAPFLEET_V4L2_BUF_TYPE_VIDEO_CAPTURE
            guard handle.attempt(CAPFLEET_VIDIOC_ENUM_FMT, &description) == nil else { break }
            if description.flags & CAPFLEET_V4L2_FMT_FLAG_EMULATED != 0 { continue }
            codes.append(description.pixelformat)
        }
        return codes
    }

    static func sizes(of handle: V4L2Handle, pixelFormat: UInt32) -> [(width: Int, height: Int)] {
        var sizes: [(width: Int, height: Int)] = []
        for index in 0..<UInt32(1024) {
            var size = v4l2_frmsizeenum()
            size.index = index
            size.pixel_format = pixelFormat
            guard handle.attempt(CAPFLEET_VIDIOC_ENUM_FRAMESIZES, &size) == nil else { break }
            switch size.type {
            case CAPFLEET_V4L2_FRMSIZE_TYPE_DISCRETE:
                sizes.append((Int(size.discrete.width), Int(size.discrete.height)))
            default:
                let step = size.stepwise
                // The size the driver runs now (e.g. 720x576 on a PAL input) belongs in the list too.
                let current = currentSize(of: handle, pixelFormat: pixelFormat)
                sizes += FrameSizeCatalog.sizes(
                    width: Int(step.min_width)...Int(step.max_width), widthStep: Int(step.step_width),
                    height: Int(step.min_height)...Int(step.max_height), heightStep: Int(step.step_height),
                    including: current.map { [$0] } ?? [])
                return sizes
            }
        }
        if sizes.isEmpty, let current = currentSize(of: handle, pixelFormat: pixelFormat) { sizes = [current] }
        return sizes
    }

    static func frameRates(of handle: V4L2Handle, pixelFormat: UInt32, width: Int, height: Int) -> [FrameRateRange] {
        var ranges: [FrameRateRange] = []
        for index in 0..<UInt32(256) {
            var interval = v4l2_frmivalenum()
            interval.index = index
            interval.pixel_format = pixelFormat
            interval.width = UInt32(width)
            interval.height = UInt32(height)
            guard handle.attempt(CAPFLEET_VIDIOC_ENUM_FRAMEINTERVALS, &interval) == nil else { break }
            if interval.type == CAPFLEET_V4L2_FRMIVAL_TYPE_DISCRETE {
                guard let fps = framesPerSecond(interval.discrete) else { continue }
                ranges.append(FrameRateRange(min: fps, max: fps))
            } else {
                // The longest interval is the lowest rate.
                guard let low = framesPerSecond(interval.stepwise.max), let high = framesPerSecond(interval.stepwise.min) else { break }
                ranges.append(FrameRateRange(min: low, max: high))
                break
            }
        }
        return ranges
    }

    static func framesPerSecond(_ interval: v4l2_fract) -> Double? {
        guard interval.numerator > 0, interval.denominator > 0 else { return nil }
        return Double(interval.denominator) / Double(interval.numerator)
    }

    /// The size the driver picks for this pixel format, for drivers that do not enumerate sizes.
    static func currentSize(of handle: V4L2Handle, pixelFormat: UInt32) -> (width: Int, height: Int)? {
        var format = v4l2_format()
        format.type = CAPFLEET_V4L2_BUF_TYPE_VIDEO_CAPTURE
        guard handle.attempt(CAPFLEET_VIDIOC_G_FMT, &format) == nil else { return nil }
        format.fmt.pix.pixelformat = pixelFormat
        guard handle.attempt(CAPFLEET_VIDIOC_TRY_FMT, &format) == nil, format.fmt.pix.pixelformat == pixelFormat else { return nil }
        return (Int(format.fmt.pix.width), Int(format.fmt.pix.height))
    }

    static func currentFrameRate(of handle: V4L2Handle) -> Double? {
        var parameters = v4l2_streamparm()
        parameters.type = CAPFLEET_V4L2_BUF_TYPE_VIDEO_CAPTURE
        guard handle.attempt(CAPFLEET_VIDIOC_G_PARM, &parameters) == nil else { return nil }
        return framesPerSecond(parameters.parm.capture.timeperframe)
    }
}

/// Turns a stepwise or continuous size range into the sizes a camera engineer would pick
/// from it: the smallest, the largest, and the common video sizes that fit the steps.
public enum FrameSizeCatalog {
    public static let commonSizes: [(width: Int, height: Int)] = [
        (160, 120), (320, 240), (640, 360), (640, 480), (800, 600), (1024, 768), (1280, 720), (1280, 960),
        (1600, 1200), (1920, 1080), (2560, 1440), (3840, 2160), (4096, 2160),
    ]

    public static func sizes(
        width: ClosedRange<Int>, widthStep: Int, height: ClosedRange<Int>, heightStep: Int,
        including extra: [(width: Int, height: Int)] = []
    ) -> [(width: Int, height: Int)] {
        func fits(_ value: Int, _ range: ClosedRange<Int>, _ step: Int) -> Bool {
            range.contains(value) && (value - range.lowerBound) % max(step, 1) == 0
        }
        var sizes = [(width.lowerBound, height.lowerBound)]
        let candidates = (commonSizes + extra).sorted { ($0.width * $0.height, $0.width) < ($1.width * $1.height, $1.width) }
        for size in candidates where fits(size.width, width, widthStep) && fits(size.height, height, heightStep) {
            if !sizes.contains(where: { $0 == size }) { sizes.append(size) }
        }
        if !sizes.contains(where: { $0 == (width.upperBound, height.upperBound) }) { sizes.append((width.upperBound, height.upperBound)) }
        return sizes
    }
}
