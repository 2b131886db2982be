import FleetCore
import Testing

@Suite struct EncoderDropOrderTests {
    @Test func aLostFrame_isCarriedByThePacketsAfterIt_neverByThoseBefore() {
        var order = EncoderDropOrder()
        // Frames 0…5 arrive; the encoder holds a few. Frame 3 fails to encode while 1 and 2
        // are still inside it; then the path refuses frame 4's packet.
        order.lost(.encoderLate, ordinal: 3)
        #expect(order.carried(by: 1) == DropTally(), "frame 1 came before the loss")
        #expect(order.carried(by: 2) == DropTally())
        order.lost(.outOfBuffers, ordinal: 4)
        #expect(order.carried(by: 5) == DropTally(outOfBuffers: 1, encoderLate: 1))
        #expect(order.carried(by: 6) == DropTally(outOfBuffers: 1, encoderLate: 1), "cumulative: said once, carried on")
    }

    @Test func theEnd_carriesEveryLoss_evenOfTheLastFrames() {
        var order = EncoderDropOrder()
        #expect(order.carried(by: 0) == DropTally())
        // Two frames left inside the encoder when it drained, after the last packet.
        order.lost(.encoderLate, ordinal: 8)
        order.lost(.encoderLate, ordinal: 9)
        #expect(order.carried(by: 7) == DropTally())
        #expect(order.all() == DropTally(encoderLate: 2))
        #expect(order.settled == DropTally(encoderLate: 2))
    }
}
