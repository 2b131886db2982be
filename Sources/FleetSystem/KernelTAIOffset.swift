import CPlatform

/// The kernel's TAI − UTC offset (adjtimex(2)): what PTP's TAI timescale is ahead of the UTC
/// the host's CLOCK_REALTIME keeps, where ptp4l, chrony or ntpd told the kernel; else 0.
public enum KernelTAIOffset {
    public static var seconds: Int64 {
        let offset = capfleet_kernel_tai_offset_seconds()
        return offset > 0 ? Int64(offset) : 0
    }
}
