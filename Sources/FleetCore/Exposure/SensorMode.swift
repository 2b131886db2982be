/// The V4L2 controls through which a sensor sub-device's frame timing is set, by their
/// control ids (linux/v4l2-controls.h; FleetCore links no V4L2 header, so they are spelt here).
public enum SensorControlID: UInt32, Sendable, CaseIterable {
    /// V4L2_CID_EXPOSURE: integration time, in lines on sensor sub-devices.
    case exposure = 0x0098_0911
    /// V4L2_CID_VBLANK: lines added after the active ones; sets the frame length.
    case verticalBlanking = 0x009E_0901
    /// V4L2_CID_HBLANK: pixels added after each line's active ones; sets the line time.
    case horizontalBlanking = 0x009E_0902
    /// V4L2_CID_PIXEL_RATE: the pixel clock in pixels per second; read-only, set by the mode.
    case pixelRate = 0x009F_0902

    /// The name the V4L2 core gives the control.
    public var name: String {
        switch self {
        case .exposure: "Exposure"
        case .verticalBlanking: "Vertical Blanking"
        case .horizontalBlanking: "Horizontal Blanking"
        case .pixelRate: "Pixel Rate"
        }
    }
}

/// Why a sensor refused a control.
public enum SensorControlError: Error, Sendable, Equatable {
    /// The control is fixed by the sensor's mode (PIXEL_RATE always, HBLANK where its range is one value).
    case readOnly(SensorControlID)
}

/// A sensor mode's timing: the active size, the pixel clock and how far the blanking and
/// the exposure may be set — what a sensor driver fixes when a format is chosen and what
/// its controls then move within. Frame timing follows from it as on every raw sensor:
/// a line lasts `width + HBLANK` pixels of the pixel clock, a frame `height + VBLANK` lines.
public struct SensorMode: Sendable, Equatable {
    public var width: Int
    public var height: Int
    /// Nominal pixels per second, as PIXEL_RATE reports it; the real oscillator is off by its ppm.
    public var pixelRate: UInt64
    public var horizontalBlankingRange: ClosedRange<Int>
    public var verticalBlankingRange: ClosedRange<Int>
    /// Exposure may last at most the frame length less this many lines (drivers say 4 or 8).
    public var exposureMarginLines: Int
    public var minimumExposureLines: Int

    public init(
        width: Int, height: Int, pixelRate: UInt64, horizontalBlankingRange: ClosedRange<Int>,
        verticalBlankingRange: ClosedRange<Int>, exposureMarginLines: Int = 4, minimumExposureLines: Int = 1
    ) {
        self.width = width
        self.height = height
        self.pixelRate = pixelRate
        self.horizontalBlankingRange = horizontalBlankingRange
        self.verticalBlankingRange = verticalBlankingRange
        self.exposureMarginLines = exposureMarginLines
        self.minimumExposureLines = minimumExposureLines
    }

    /// 1920×1080 with a 2200-pixel line at 74.25 MHz: 29.63 µs a line, 30 fps at 1125 lines
    /// (VBLANK 45), as the broadcast 1080p30 timing many sensors' modes follow.
    public static let fullHD = SensorMode(
        width: 1920, height: 1080, pixelRate: 74_250_000, horizontalBlankingRange: 280...280,
        verticalBlankingRange: 45...8_000)

    /// Nominal duration of a line in ns for a horizontal blanking of `horizontalBlanking` pixels.
    public func lineTime(horizontalBlanking: Int) -> Double {
        Double(width + horizontalBlanking) * 1e9 / Double(pixelRate)
    }

    /// Frame lengths in lines that the VBLANK range allows.
    public var frameLengthRange: ClosedRange<Int> {
        (height + verticalBlankingRange.lowerBound)...(height + verticalBlankingRange.upperBound)
    }

    /// The VBLANK that makes a frame `frameLength` lines long, within the range.
    public func verticalBlanking(forFrameLength frameLength: Int) -> Int {
        min(max(frameLength - height, verticalBlankingRange.lowerBound), verticalBlankingRange.upperBound)
    }

    /// The exposure range in lines for a frame `frameLength` lines long: drivers narrow it
    /// whenever VBLANK changes, so that integration never outlasts the frame.
    public func exposureRange(frameLength: Int) -> ClosedRange<Int> {
        minimumExposureLines...max(minimumExposureLines, frameLength - exposureMarginLines)
    }
}
