import CTurboJPEG

/// Encodes RGB pictures as baseline JPEG with TurboJPEG. Owns its TurboJPEG handle, so one
/// encoder belongs to one thread at a time (the agent's preview thread keeps its own).
public final class JPEGEncoder {
    private let handle: tjhandle

    public init() throws(ImagingError) {
        guard let handle = tjInitCompress() else { throw .jpeg(call: "tjInitCompress", message: Self.lastError(nil)) }
        self.handle = handle
    }

    deinit { tjDestroy(handle) }

    /// `quality` 1…100; chroma subsampled 4:2:0, as cameras and browsers expect.
    public func encode(_ image: RGBImage, quality: Int) throws(ImagingError) -> [UInt8] {
        var output: UnsafeMutablePointer<UInt8>?
        var size: UInt = 0
        let status = image.pixels.withUnsafeBufferPointer { pixels in
            tjCompress2(
                handle, pixels.baseAddress, Int32(image.width), Int32(image.width * 3), Int32(image.height), Int32(TJPF_RGB.rawValue),
                &output, &size, Int32(TJSAMP_420.rawValue), Int32(min(100, max(1, quality))), TJFLAG_FASTDCT)
        }
        defer { if let output { tjFree(output) } }
        guard status == 0, let output else { throw .jpeg(call: "tjCompress2", message: Self.lastError(handle)) }
        return Array(UnsafeBufferPointer(start: output, count: Int(size)))
    }

    static func lastError(_ handle: tjhandle?) -> String { String(cString: tjGetErrorStr2(handle)) }
}

/// Decodes JPEG (MJPG frames, previews) to RGB with TurboJPEG, optionally shrunk by the
/// library while decoding (1/2, 1/4, 1/8: only a fraction of the DCT work), which is how a
/// preview of an MJPEG camera stays cheap. One decoder belongs to one thread at a time.
public final class JPEGDecoder {
    private let handle: tjhandle

    public init() throws(ImagingError) {
        guard let handle = tjInitDecompress() else { throw .jpeg(call: "tjInitDecompress", message: JPEGEncoder.lastError(nil)) }
        self.handle = handle
    }

    deinit { tjDestroy(handle) }

    /// The JPEG's width and height, from its header.
    public func size(of jpeg: UnsafeRawBufferPointer) throws(ImagingError) -> (width: Int, height: Int) {
        var width: Int32 = 0, height: Int32 = 0, subsampling: Int32 = 0, colourspace: Int32 = 0
        guard
            tjDecompressHeader3(
                handle, jpeg.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt(jpeg.count),
                &width, &height, &subsampling, &colourspace) == 0
        else {
            throw .jpeg(call: "tjDecompressHeader3", message: JPEGEncoder.lastError(handle))
        }
        return (Int(width), Int(height))
    }

    /// Decodes the whole picture, or, with `atLeastWidth`, the smallest of the library's
    /// scaled sizes that is still at least that wide (the caller scales the rest of the way).
    public func decode(_ jpeg: UnsafeRawBufferPointer, atLeastWidth wanted: Int? = nil) throws(ImagingError) -> RGBImage {
        let (width, height) = try size(of: jpeg)
        guard width > 0, height > 0 else { throw .invalidSize(width: width, height: height) }
        var factor = tjscalingfactor(num: 1, denom: 1)
        if let wanted {
            var count: Int32 = 0
            if let factors = tjGetScalingFactors(&count) {
                // Shrinking only (num < denom), smallest result still wide enough.
                for candidate in UnsafeBufferPointer(start: factors, count: Int(count)) where candidate.num < candidate.denom {
                    let scaled = Int(capfleet_tj_scaled(Int32(width), candidate))
                    if scaled >= wanted, scaled < Int(capfleet_tj_scaled(Int32(width), factor)) { factor = candidate }
                }
            }
        }
        let scaledWidth = Int(capfleet_tj_scaled(Int32(width), factor)), scaledHeight = Int(capfleet_tj_scaled(Int32(height), factor))
        var pixels = [UInt8](repeating: 0, count: scaledWidth * scaledHeight * 3)
        let status = pixels.withUnsafeMutableBufferPointer { out in
            tjDecompress2(
                handle, jpeg.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt(jpeg.count), out.baseAddress,
                Int32(scaledWidth), Int32(scaledWidth * 3), Int32(scaledHeight), Int32(TJPF_RGB.rawValue), TJFLAG_FASTDCT)
        }
        guard status == 0 else { throw .jpeg(call: "tjDecompress2", message: JPEGEncoder.lastError(handle)) }
        return RGBImage(width: scaledWidth, height: scaledHeight, pixels: pixels)
    }

    public func decode(_ jpeg: [UInt8], atLeastWidth wanted: Int? = nil) throws(ImagingError) -> RGBImage {
        // withUnsafeBytes rethrows untyped errors: the typed one crosses as a Result.
        try jpeg.withUnsafeBytes { bytes in Result { () throws(ImagingError) in try decode(bytes, atLeastWidth: wanted) } }.get()
    }
}
