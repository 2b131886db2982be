import FleetCore
import Testing

/// A GenICam camera's region of interest: windows offered as formats, and placed on its sensor.
@Suite struct SensorRegionTests {
    @Test func commonWindows_areOfferedInsideTheSensor_onItsSteps_andNotTwice() {
        let sensor = SensorRegion(sensorWidth: 2048, sensorHeight: 2048)
        let offered = sensor.windows(besides: [(512, 512), (2048, 2048)])
        #expect(offered.map { "\($0.width)x\($0.height)" } == ["1920x1080", "1280x720", "640x480"])
        // A 1280x1024 sensor in steps of 16 across: no 1080p, VGA already offered.
        let small = SensorRegion(sensorWidth: 1280, sensorHeight: 1024, widthStep: 16, heightStep: 2)
        #expect(small.windows(besides: [(640, 480)]).map { "\($0.width)x\($0.height)" } == ["1280x720"])
        // Steps the common size is off: the step below.
        let odd = SensorRegion(sensorWidth: 4096, sensorHeight: 3000, widthStep: 24, heightStep: 1)
        #expect(odd.windows(besides: []).map(\.width) == [1920, 1272, 624])
        // A window below the camera's smallest is not offered.
        let tiny = SensorRegion(sensorWidth: 800, sensorHeight: 600, minimumWidth: 700, minimumHeight: 500)
        #expect(tiny.windows(besides: []).isEmpty)
    }

    @Test func centred_sitsInTheMiddleOnTheOffsetSteps() throws {
        let sensor = SensorRegion(sensorWidth: 2048, sensorHeight: 2048, leftStep: 8, topStep: 4)
        #expect(try sensor.place(.centred, width: 640, height: 480) == PixelRectangle(left: 704, top: 784, width: 640, height: 480))
        let fine = SensorRegion(sensorWidth: 1921, sensorHeight: 1081)
        #expect(try fine.place(.centred, width: 640, height: 480) == PixelRectangle(left: 640, top: 300, width: 640, height: 480))
        // Binned 2x2: the sensor is half as wide and high in the format's pixels.
        #expect(try sensor.place(.centred, width: 640, height: 480, binning: 2) == PixelRectangle(left: 192, top: 272, width: 640, height: 480))
    }

    @Test func placedAt_goesDownToTheStepBelow_andAWindowLeavingTheSensorIsRefusedWithWhereItFits() throws {
        let sensor = SensorRegion(sensorWidth: 2048, sensorHeight: 2048, leftStep: 8, topStep: 2)
        #expect(try sensor.place(.at(left: 101, top: 203), width: 640, height: 480) == PixelRectangle(left: 96, top: 202, width: 640, height: 480))
        #expect(
            try sensor.place(.at(left: 1408, top: 1568), width: 640, height: 480) == PixelRectangle(left: 1408, top: 1568, width: 640, height: 480))
        do {
            _ = try sensor.place(.at(left: 1409, top: 0), width: 640, height: 480)
            Issue.record("a window past the sensor's right edge was placed")
        } catch {
            #expect(error.description.contains("its corner can go from 0,0 to 1408,1568 in steps of 8 across and 2 down"), "\(error)")
        }
        #expect(throws: SensorRegion.Refusal.self) { try sensor.place(.at(left: -2, top: 0), width: 640, height: 480) }
        // The full sensor has nowhere to go.
        do {
            _ = try sensor.place(.at(left: 8, top: 0), width: 2048, height: 2048)
            Issue.record("the whole sensor was moved")
        } catch {
            #expect(error.description.contains("it covers the whole sensor: nothing to move"), "\(error)")
        }
        #expect(throws: SensorRegion.Refusal.self) { try sensor.place(.centred, width: 4096, height: 480) }
    }
}
