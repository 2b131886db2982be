import CAlsa

/// What went wrong with an ALSA capture device, in ALSA's words and with what to do.
public struct AlsaError: Error, CustomStringConvertible, Sendable {
    /// The device (`hw:CARD=…,DEV=…`) and the call that failed.
    public let device: String
    public let operation: String
    /// ALSA's negative error code (a negated errno).
    public let code: Int32

    public init(device: String, operation: String, code: Int32) {
        self.device = device
        self.operation = operation
        self.code = code
    }

    public var description: String {
        let reason = String(cString: snd_strerror(code))
        let hint: String
        switch -code {
        case 16: hint = " (EBUSY: another program holds the device; `fuser -v /dev/snd/*` names it)"
        case 13: hint = " (EACCES: the agent's user needs the audio group, or a udev rule for /dev/snd)"
        case 2, 19: hint = " (the device is gone: unplugged, or its driver unloaded)"
        case 22: hint = " (the device does not offer this format: `capfleet device` lists what it does)"
        default: hint = ""
        }
        return "ALSA \(operation) on \(device) failed: \(reason)\(hint)"
    }
}

/// ALSA's result: the value when it is not negative, else an `AlsaError`.
@discardableResult
func alsaCheck(_ result: Int32, _ operation: String, device: String) throws(AlsaError) -> Int32 {
    guard result >= 0 else { throw AlsaError(device: device, operation: operation, code: result) }
    return result
}
