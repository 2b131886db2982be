import Logging
import ServiceLifecycle

extension ServiceGroup {
    /// One daemon's parts, listed in the order they were opened: each after the parts it
    /// uses. Graceful shutdown stops them in reverse, each once the part listed after it
    /// has ended (swift-service-lifecycle signals a group's services last first and awaits
    /// each). This list is the daemon's shutdown order; no other is kept.
    ///
    /// The group traps no signal: it runs inside the daemon's service, which runs in the
    /// command's group, and a group run as a service follows its parent's graceful
    /// shutdown. A part that ends or fails on its own shuts the others down the same way
    /// (instead of cancelling them all at once), and the group then ends with its error.
    public static func daemon(_ parts: [any Service], logger: Logger) -> ServiceGroup {
        let services = parts.map { part in
            ServiceGroupConfiguration.ServiceConfiguration(
                service: LoggedPart(part: part, logger: logger),
                successTerminationBehavior: .gracefullyShutdownGroup,
                failureTerminationBehavior: .gracefullyShutdownGroup,
                serviceName: "\(part)")
        }
        return ServiceGroup(configuration: ServiceGroupConfiguration(services: services, logger: logger))
    }
}

/// Says when each part has stopped (at debug level), so that a shutdown that hangs names
/// the part it hangs in, and a test can read the order parts stopped in.
struct LoggedPart: Service {
    let part: any Service
    let logger: Logger

    func run() async throws {
        do {
            try await part.run()
            logger.debug("part stopped", metadata: ["part": "\(part)"])
        } catch {
            logger.debug("part stopped", metadata: ["part": "\(part)", "error": "\(error)"])
            throw error
        }
    }
}
