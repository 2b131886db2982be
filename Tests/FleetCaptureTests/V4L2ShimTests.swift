import CV4L2
import FleetCore
import Testing

@Suite struct V4L2ShimTests {
    @Test func fourCCPacking_matchesTheKernelHeaders() {
        #expect(PixelFormat.yuyv.v4l2Code == CAPFLEET_V4L2_PIX_FMT_YUYV)
        #expect(PixelFormat.nv12.v4l2Code == CAPFLEET_V4L2_PIX_FMT_NV12)
        #expect(PixelFormat.mjpeg.v4l2Code == CAPFLEET_V4L2_PIX_FMT_MJPEG)
        #expect(PixelFormat(v4l2Code: CAPFLEET_V4L2_PIX_FMT_GREY) == .grey)
        #expect(CAPFLEET_VIDIOC_QUERYCAP != 0 && CAPFLEET_VIDIOC_DQBUF != CAPFLEET_VIDIOC_QBUF)
    }

    @Test func panAndTiltIDs_matchTheKernelHeaders() {
        #expect(DeviceControl.panAbsoluteID == CAPFLEET_V4L2_CID_PAN_ABSOLUTE && DeviceControl.tiltAbsoluteID == CAPFLEET_V4L2_CID_TILT_ABSOLUTE)
    }
}
