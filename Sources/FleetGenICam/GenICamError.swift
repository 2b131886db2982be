import CAravis

/// What went wrong with a GenICam camera, in Aravis's words, with what was being done.
public struct GenICamError: Error, CustomStringConvertible, Sendable {
    /// The camera (its fleet id, or Aravis's id before it has one) and what was being done.
    public let device: String
    public let operation: String
    public let message: String

    public init(device: String, operation: String, message: String) {
        self.device = device
        self.operation = operation
        self.message = message
    }

    public var description: String { "GenICam camera \(device): \(operation) failed: \(message)" }
}

/// Runs an Aravis call that reports through a GError; throws its message.
func aravisCall<T>(
    _ device: String, _ operation: String, _ body: (UnsafeMutablePointer<UnsafeMutablePointer<GError>?>) -> T
) throws(GenICamError) -> T {
    var error: UnsafeMutablePointer<GError>?
    let result = body(&error)
    if let message = capfleet_arv_error_message(error) {
        defer { free(message) }
        throw GenICamError(device: device, operation: operation, message: String(cString: message))
    }
    return result
}
