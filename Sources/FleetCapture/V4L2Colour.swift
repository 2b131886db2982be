import CV4L2
import FleetCore

/// The colour description a V4L2 driver gives its negotiated format (VIDIOC_S_FMT's
/// `colorspace`, `xfer_func`, `ycbcr_enc`, `quantization`), as the fleet's: the parts left at
/// their defaults follow from the colour space as the kernel's V4L2_MAP_*_DEFAULT macros say.
/// nil where the driver does not say (colorspace DEFAULT) or says what H.273's common codes
/// cannot carry here (DCI-P3, opRGB, SMPTE 240M, raw): such a camera declares nothing.
enum V4L2Colour {
    // V4L2's values (videodev2.h), which Swift sees as plain numbers.
    static let smpte170m: UInt32 = 1, rec709: UInt32 = 3, bt878: UInt32 = 4, system470M: UInt32 = 5, system470BG: UInt32 = 6
    static let jpeg: UInt32 = 7, srgb: UInt32 = 8, bt2020: UInt32 = 10

    static func description(colorspace: UInt32, transfer: UInt32, encoding: UInt32, quantization: UInt32, isYUV: Bool) -> ColourDescription? {
        let primaries: ColourDescription.Primaries
        switch colorspace {
        case smpte170m, bt878, system470M, system470BG: primaries = .bt601
        case rec709, srgb, jpeg: primaries = .bt709
        case bt2020: primaries = .bt2020
        default: return nil
        }
        // xfer_func: 1 709, 2 sRGB, 5 none (linear), 7 SMPTE 2084 (PQ); 0 follows the colour space.
        let transferCode = transfer != 0 ? transfer : (colorspace == srgb || colorspace == jpeg ? 2 : 1)
        let transferFunction: ColourDescription.Transfer
        switch transferCode {
        case 1: transferFunction = .bt709
        case 2: transferFunction = .srgb
        case 5: transferFunction = .linear
        case 7: transferFunction = .pq
        default: return nil
        }
        // ycbcr_enc: 1 601, 2 709, 3 xvYCC 601, 4 xvYCC 709, 5 sYCC, 6 BT.2020; 0 follows the colour space.
        let encodingCode = encoding != 0 ? encoding : (colorspace == rec709 ? 2 : colorspace == bt2020 ? 6 : 1)
        let matrix: ColourDescription.Matrix
        switch encodingCode {
        case 1, 3, 5: matrix = .bt601
        case 2, 4: matrix = .bt709
        case 6: matrix = .bt2020
        default: return nil
        }
        // quantization: 1 full, 2 limited; 0: full for RGB and JPEG's colour space, limited for other YUV.
        let range: ColourDescription.Range =
            switch quantization {
            case 1: .full
            case 2: .limited
            default: !isYUV || colorspace == jpeg ? .full : .limited
            }
        return ColourDescription(primaries: primaries, transfer: transferFunction, matrix: matrix, range: range)
    }

    /// The negotiated format's description.
    static func description(of pix: v4l2_pix_format, pixelFormat: PixelFormat) -> ColourDescription? {
        let yuv = ["YUYV", "UYVY", "YVYU", "VYUY", "NV12", "NV21", "YU12", "YV12", "NV16", "NV61", "422P", "P010", "P016", "MJPG", "JPEG"]
        return description(
            colorspace: pix.colorspace, transfer: pix.xfer_func, encoding: pix.ycbcr_enc, quantization: pix.quantization,
            isYUV: yuv.contains(pixelFormat.fourCC))
    }
}
