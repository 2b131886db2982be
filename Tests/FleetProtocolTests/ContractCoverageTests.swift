import FleetProtocol
import Foundation
import Testing

/// The .proto files are the source of truth, and a third party codes from the documents: a
/// request, reply field, topic, message, version or time limit missing from its document fails
/// here, naming what to write where.
@Suite struct ContractCoverageTests {
    /// Every field of these messages has a row (or an inline "`name` (N") in its document.
    static let documentedByNumber: [(proto: String, message: String, document: String)] = [
        ("operator.proto", "OperatorRequest", "operator.md"),
        ("operator.proto", "OperatorReply", "operator.md"),
        ("operator.proto", "NodeInfo", "operator.md"),
        ("operator.proto", "DeviceInfo", "operator.md"),
        ("operator.proto", "CoordinatorEndpoints", "operator.md"),
        ("operator.proto", "DashboardSignIn", "operator.md"),
        ("operator.proto", "DashboardSessionInfo", "operator.md"),
        ("operator.proto", "TakeStill", "stills.md"),
        ("operator.proto", "StillInfo", "stills.md"),
        ("operator.proto", "StillDeviceInfo", "stills.md"),
        ("operator.proto", "StillImageInfo", "stills.md"),
        ("telemetry.proto", "NodeStatus", "telemetry.md"),
        ("telemetry.proto", "DeviceStatus", "telemetry.md"),
        ("telemetry.proto", "DropsReport", "telemetry.md"),
        ("telemetry.proto", "FleetEvent", "telemetry.md"),
        ("telemetry.proto", "DetectionReport", "telemetry.md"),
        ("common.proto", "DetectedObject", "telemetry.md"),
        ("control.proto", "Command", "commands.md"),
        ("control.proto", "CommandReply", "commands.md"),
    ]

    @Test func everyRequestReplyAndStatusField_hasItsNumberedEntryInItsDocument() throws {
        var missing: [String] = []
        for (proto, message, document) in Self.documentedByNumber {
            let declaration = try #require(try ProtoSchema.load(proto)[message], "\(proto) declares no \(message)")
            let text = try ContractDocuments.text(document)
            for field in declaration.fields where !ContractDocuments.documents(field, in: text) {
                missing.append("\(document): \(message).\(field.name) (\(field.number))")
            }
        }
        #expect(missing.isEmpty, "write a row `| N | name | type | meaning |` (or \"`name` (N, type)\") for: \(missing.joined(separator: "; "))")
    }

    /// Each request in the oneof is a row of the Requests table with its number and name.
    @Test func operatorDocument_listsEveryRequestOfTheOneof_withItsNumber() throws {
        let request = try #require(try ProtoSchema.load("operator.proto")["OperatorRequest"])
        let rows = ContractDocuments.table(after: "### Requests", in: try ContractDocuments.text("operator.md"))
        let listed = Set(rows.compactMap { row in row.count > 1 ? "\(row[0]) \(row[1])" : nil })
        let bodies = request.fields.filter { $0.number >= 10 }
        #expect(bodies.count >= 52, "the oneof has its requests (52 at 1.6): \(bodies.count)")
        let missing = bodies.filter { !listed.contains("\($0.number) `\($0.name)`") }.map { "\($0.number) \($0.name)" }
        #expect(missing.isEmpty, "operator.md, \"Requests\", has no row for: \(missing)")
    }

    @Test func everyMessageFieldAndEnumValue_isNamedSomewhereInTheDocuments() throws {
        let documents = try ContractDocuments.all()
        var missing: [String] = []
        for schema in try ProtoSchema.all() {
            for declaration in schema.declarations {
                for field in declaration.fields {
                    switch declaration.kind {
                    case .message:
                        if !documents.contains("`\(field.name)`") && documents.range(of: "| \(field.name) |") == nil {
                            missing.append("\(schema.file): \(declaration.name).\(field.name)")
                        }
                    case .enumeration:
                        guard !field.name.hasSuffix("_UNSPECIFIED") else { continue }
                        // `FRAME_FLAG_UPSCALED`, or its short name (`UPSCALED`, "upscaled") beside its enum's.
                        let short =
                            field.name.hasPrefix(Self.upperSnake(declaration.name) + "_")
                            ? String(field.name.dropFirst(Self.upperSnake(declaration.name).count + 1)) : field.name
                        if !documents.contains(field.name)
                            && documents.range(of: "\\b\(short)\\b", options: [.regularExpression, .caseInsensitive]) == nil
                        {
                            missing.append("\(schema.file): \(declaration.name).\(field.name)")
                        }
                    }
                }
            }
        }
        #expect(missing.isEmpty, "not in any proto-docs/*.md: \(missing.joined(separator: ", "))")
    }

    /// README's "Messages" table names every top-level message and enum in its file's row.
    @Test func readmeMessagesTable_namesEveryMessageOfEachFile() throws {
        let readme = try ContractDocuments.text("README.md")
        var missing: [String] = []
        for schema in try ProtoSchema.all() {
            let row = try #require(
                readme.split(separator: "\n").first { $0.hasPrefix("| `\(schema.file)` |") }, "README has no row for \(schema.file)")
            for declaration in schema.declarations where !declaration.nested && !row.contains("`\(declaration.name)`") {
                missing.append("\(schema.file): \(declaration.name)")
            }
        }
        #expect(missing.isEmpty, "README.md, \"Messages\": \(missing)")
    }

    @Test func readmeVersioningTable_runsThroughTheCurrentMinor() throws {
        let rows = ContractDocuments.table(after: "## Versioning", in: try ContractDocuments.text("README.md"))
        let minors = rows.compactMap { UInt32($0.first ?? "") }
        #expect(minors == Array(1...WireDefaults.protocolMinor), "one row per minor, 1 to \(WireDefaults.protocolMinor): \(minors)")
        for document in ["README.md", "operator.md", "telemetry.md", "commands.md"] {
            let status = try #require(try ContractDocuments.text(document).split(separator: "\n").first { $0.hasPrefix("Status:") })
            #expect(status.contains("minor \(WireDefaults.protocolMinor)"), "\(document) says it is current: \(status)")
        }
    }

    /// Topics: the comments of telemetry.proto, the code's prefixes and telemetry.md's table agree.
    @Test func everyTelemetryTopic_isInTheTopicsTable_andPublishedUnderTheCodesPrefixes() throws {
        let proto = try String(contentsOf: ContractDocuments.folder.appendingPathComponent("telemetry.proto"), encoding: .utf8)
        let declared = Set(proto.matches(of: /Topic "(\w+\.)/).map { String($0.1) })
        #expect(
            declared.isSubset(of: Set(TelemetryTopic.prefixes)), "telemetry.proto names \(declared), the code publishes \(TelemetryTopic.prefixes)")
        let rows = ContractDocuments.table(after: "## Topics", in: try ContractDocuments.text("telemetry.md"))
        let documented = Set(rows.compactMap { $0.first.flatMap { $0.split(separator: "<").first.map { String($0.dropFirst()) } } })
        #expect(documented == Set(TelemetryTopic.prefixes), "telemetry.md, \"Topics\": \(documented.sorted()) against \(TelemetryTopic.prefixes)")
        let subscriber = try String(contentsOf: ContractDocuments.folder.appendingPathComponent("examples/telemetry_subscriber.py"), encoding: .utf8)
        for prefix in TelemetryTopic.prefixes {
            #expect(subscriber.contains("\"\(prefix)\": ("), "the example subscriber decodes \(prefix)")
        }
    }

    /// operator.md, "Time limits": a row per request; where it gives plain seconds they are
    /// the ones the CLI waits (`OperatorReplyTime`) for the request with its defaults.
    @Test func timeLimitsTable_hasEveryRequest_andAgreesWithWhatTheClientWaits() throws {
        let request = try #require(try ProtoSchema.load("operator.proto")["OperatorRequest"])
        let rows = ContractDocuments.table(after: "## Time limits", in: try ContractDocuments.text("operator.md"))
        var byName: [String: [String]] = [:]
        for row in rows where row.count == 3 { byName[row[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))] = row }
        var wrong: [String] = []
        for field in request.fields where field.number >= 10 {
            guard let row = byName[field.name] else {
                wrong.append("\(field.name): no row")
                continue
            }
            let body = try Capfleet_V1_OperatorRequest(jsonString: "{\"\(field.name)\": {}}").body
            #expect(body != nil, "\(field.name) decodes as a request")
            func seconds(_ cell: String) -> Double? {
                let figure = cell.split(separator: ":").first.map(String.init) ?? cell
                guard figure.hasSuffix(" s") else { return nil }
                return Double(figure.dropLast(2))
            }
            if let coordinator = seconds(row[1]), coordinator != OperatorReplyTime.coordinatorWaitSeconds(for: body) {
                wrong.append("\(field.name): the table says \(coordinator) s, the code \(OperatorReplyTime.coordinatorWaitSeconds(for: body)) s")
            }
            if let client = seconds(row[2]), client != OperatorReplyTime.clientTimeoutSeconds(for: body) {
                wrong.append(
                    "\(field.name): a client waits \(client) s by the table, \(OperatorReplyTime.clientTimeoutSeconds(for: body)) s by the code")
            }
        }
        #expect(wrong.isEmpty, "operator.md, \"Time limits\": \(wrong.joined(separator: "; "))")
    }

    /// metrics.md lists what the coordinator registers, and nothing it does not.
    @Test func metricsDocument_listsExactlyTheMetricsTheCoordinatorRegisters() throws {
        let sources = ContractDocuments.repository.appendingPathComponent("Sources/FleetCoordinator")
        var registered: Set<String> = []
        // The module is foldered by topic: every file under it.
        let files = try FileManager.default.subpathsOfDirectory(atPath: sources.path)
        for file in files where file.hasSuffix(".swift") {
            let code = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            for match in code.matches(of: /descriptor\(\s*"(\w+)",\s*"(\w*)"/) {
                registered.insert("capfleet_" + String(match.1) + (match.2.isEmpty ? "" : "_" + String(match.2)))
            }
        }
        #expect(registered.count >= 25, "the registrations were found: \(registered.sorted())")
        let document = try ContractDocuments.text("metrics.md")
        let tables = ContractDocuments.table(after: "## Counters", in: document) + ContractDocuments.table(after: "## Gauges", in: document)
        let documented = Set(tables.compactMap { $0.first?.trimmingCharacters(in: CharacterSet(charactersIn: "`")) })
        #expect(registered.subtracting(documented).isEmpty, "metrics.md does not list \(registered.subtracting(documented).sorted())")
        #expect(
            documented.subtracting(registered).isEmpty, "metrics.md lists metrics nothing registers: \(documented.subtracting(registered).sorted())")
    }

    static func upperSnake(_ camel: String) -> String {
        var out = ""
        for (index, character) in camel.enumerated() {
            if character.isUppercase, index > 0 { out += "_" }
            out += character.uppercased()
        }
        return out
    }
}
