import FleetProtocol
import Testing

/// A REQ socket's empty delimiter is read as an envelope and given back with the reply;
/// anything else keeps the one-part framing a DEALER uses.
@Suite struct OperatorEnvelopeTests {
    let request: [UInt8] = [0x08, 0x07]  // OperatorRequest{request_id: 7}

    @Test func aDealersOnePartRequest_isAnsweredWithoutAnEnvelope() {
        let opened = OperatorFraming.open([request])
        #expect(opened.framing == .bare && opened.request == request)
        #expect(opened.framing.wrap([[1], [2]]) == [[1], [2]])
    }

    @Test func aReqSocketsDelimitedRequest_isAnsweredBehindTheSameDelimiter() {
        let opened = OperatorFraming.open([[], request])
        #expect(opened.framing == .delimited && opened.request == request)
        #expect(opened.framing.wrap([[9]]) == [[], [9]])
        #expect(opened.framing.wrap([[9], [1, 2, 3]]) == [[], [9], [1, 2, 3]], "a frame's payload follows the reply, after the delimiter")
    }

    @Test func aDelimitedMessageWithTwoBodyParts_hasNoRequest_butKeepsItsEnvelopeForTheRefusal() {
        let opened = OperatorFraming.open([[], request, [1]])
        #expect(opened.request == nil && opened.framing == .delimited)
    }

    @Test func twoPartsWithoutAnEmptyFirst_areNotARequest() {
        let opened = OperatorFraming.open([request, request])
        #expect(opened.request == nil && opened.framing == .bare)
    }

    @Test func anEmptyOnePartMessage_isABareEmptyRequest_notAnEnvelope() {
        let opened = OperatorFraming.open([[]])
        #expect(opened.framing == .bare && opened.request == [])
    }
}
