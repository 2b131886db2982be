import Foundation
import GRDB

/// The schema as a sequence of migrations. Shipped migrations are never edited; a change
/// is a new migration appended at the end.
enum FleetSchema {
    /// Widens the device table's CHECK on `kind`. SQLite cannot change a CHECK, so the table is
    /// rebuilt from its own definition (which later migrations added columns to), under a new
    /// name and renamed back; GRDB defers foreign key checks to the end of the migration.
    static func widenDeviceKinds(_ db: Database, migration: String, from narrow: String, to widened: String) throws {
        guard let definition = try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'device'"),
            definition.contains(narrow)
        else {
            throw DatabaseError(message: "the device table is not the one migration \(migration) rebuilds")
        }
        // The columns as they are, under a new name (the name may be quoted: `"device"`).
        guard let columns = definition.firstIndex(of: "(") else { throw DatabaseError(message: "the device table has no columns") }
        let rebuilt = "device_\(migration)"
        try db.execute(sql: "CREATE TABLE \(rebuilt) " + definition[columns...].replacingOccurrences(of: narrow, with: widened))
        try db.execute(
            sql: """
                INSERT INTO \(rebuilt) SELECT * FROM device;
                DROP TABLE device;
                ALTER TABLE \(rebuilt) RENAME TO device;
                CREATE INDEX device_node ON device(nodeId);
                """)
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: nodes, devices, formats, history, audit") { db in
            try db.execute(
                sql: """
                    CREATE TABLE node (
                        id TEXT PRIMARY KEY NOT NULL CHECK (length(id) > 0),
                        name TEXT NOT NULL,
                        hostname TEXT NOT NULL,
                        softwareVersion TEXT NOT NULL,
                        address TEXT NOT NULL DEFAULT '',
                        online INTEGER NOT NULL DEFAULT 0 CHECK (online IN (0, 1)),
                        firstSeenAt INTEGER NOT NULL,
                        lastSeenAt INTEGER NOT NULL
                    );
                    CREATE TABLE device (
                        id TEXT PRIMARY KEY NOT NULL CHECK (length(id) > 0),
                        nodeId TEXT NOT NULL REFERENCES node(id) ON DELETE CASCADE,
                        name TEXT NOT NULL,
                        driver TEXT NOT NULL,
                        kind TEXT NOT NULL CHECK (kind IN ('synthetic', 'v4l2')),
                        present INTEGER NOT NULL DEFAULT 1 CHECK (present IN (0, 1)),
                        activeFormatPosition INTEGER NOT NULL DEFAULT 0,
                        activeFrameRate REAL NOT NULL DEFAULT 0,
                        framesReceived INTEGER NOT NULL DEFAULT 0,
                        bytesReceived INTEGER NOT NULL DEFAULT 0,
                        dropsLate INTEGER NOT NULL DEFAULT 0,
                        dropsOutOfBuffers INTEGER NOT NULL DEFAULT 0,
                        dropsDiscontinuity INTEGER NOT NULL DEFAULT 0,
                        lastFrameAt INTEGER
                    );
                    CREATE INDEX device_node ON device(nodeId);
                    CREATE TABLE format (
                        deviceId TEXT NOT NULL REFERENCES device(id) ON DELETE CASCADE,
                        position INTEGER NOT NULL CHECK (position >= 0),
                        pixelFormat TEXT NOT NULL CHECK (length(pixelFormat) BETWEEN 1 AND 4),
                        width INTEGER NOT NULL CHECK (width > 0),
                        height INTEGER NOT NULL CHECK (height > 0),
                        fieldOfViewDegrees REAL,
                        maxZoomFactor REAL NOT NULL CHECK (maxZoomFactor >= 1),
                        upscaleThresholdZoomFactor REAL,
                        binned INTEGER NOT NULL CHECK (binned IN (0, 1)),
                        bitDepth INTEGER NOT NULL,
                        PRIMARY KEY (deviceId, position)
                    );
                    CREATE TABLE frameRateRange (
                        deviceId TEXT NOT NULL,
                        formatPosition INTEGER NOT NULL,
                        position INTEGER NOT NULL,
                        minFps REAL NOT NULL CHECK (minFps > 0),
                        maxFps REAL NOT NULL CHECK (maxFps >= minFps),
                        PRIMARY KEY (deviceId, formatPosition, position),
                        FOREIGN KEY (deviceId, formatPosition) REFERENCES format(deviceId, position) ON DELETE CASCADE
                    );
                    CREATE TABLE connectionEvent (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        nodeId TEXT NOT NULL REFERENCES node(id) ON DELETE CASCADE,
                        kind TEXT NOT NULL CHECK (kind IN ('registered', 'online', 'offline')),
                        address TEXT NOT NULL DEFAULT '',
                        at INTEGER NOT NULL
                    );
                    CREATE INDEX connectionEvent_node ON connectionEvent(nodeId, at);
                    CREATE TABLE auditLog (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        at INTEGER NOT NULL,
                        actor TEXT NOT NULL,
                        action TEXT NOT NULL,
                        target TEXT NOT NULL,
                        outcome TEXT NOT NULL CHECK (outcome IN ('ok', 'refused', 'failed')),
                        detail TEXT NOT NULL DEFAULT ''
                    );
                    -- The audit log is append-only: history is evidence.
                    CREATE TRIGGER auditLog_no_update BEFORE UPDATE ON auditLog
                        BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
                    CREATE TRIGGER auditLog_no_delete BEFORE DELETE ON auditLog
                        BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
                    """)
        }
        migrator.registerMigration("v2: configuration leases") { db in
            try db.execute(
                sql: """
                    CREATE TABLE configurationLease (
                        deviceId TEXT PRIMARY KEY NOT NULL REFERENCES device(id) ON DELETE CASCADE,
                        holder TEXT NOT NULL CHECK (length(holder) > 0),
                        acquiredAt INTEGER NOT NULL,
                        expiresAt INTEGER NOT NULL CHECK (expiresAt > acquiredAt)
                    );
                    """)
        }
        migrator.registerMigration("v3: device descriptors, drop recovery, lease sessions") { db in
            try db.execute(
                sql: """
                    -- The device's last self-description (a protobuf DeviceDescriptor: controls, crop,
                    -- focus capabilities, path), kept so an offline device can still be inspected.
                    ALTER TABLE device ADD COLUMN descriptor BLOB;
                    -- A lease taken within an operator session ends with the session.
                    ALTER TABLE configurationLease ADD COLUMN sessionId TEXT;
                    CREATE TABLE dropRecoveryPolicy (
                        deviceId TEXT PRIMARY KEY NOT NULL REFERENCES device(id) ON DELETE CASCADE,
                        enabled INTEGER NOT NULL CHECK (enabled IN (0, 1)),
                        minimumFps REAL NOT NULL CHECK (minimumFps > 0),
                        lateDropShare REAL NOT NULL CHECK (lateDropShare > 0 AND lateDropShare < 1),
                        quietSeconds INTEGER NOT NULL CHECK (quietSeconds > 0),
                        updatedAt INTEGER NOT NULL
                    );
                    """)
        }
        migrator.registerMigration("v4: big-endian pixel formats") { db in
            // V4L2 names big-endian variants "AR15-BE": the pixel format may be up to 8
            // characters. SQLite cannot change a CHECK, so the table is rebuilt (GRDB
            // defers foreign key checks to the end of the migration).
            try db.execute(
                sql: """
                    CREATE TABLE format_v4 (
                        deviceId TEXT NOT NULL REFERENCES device(id) ON DELETE CASCADE,
                        position INTEGER NOT NULL CHECK (position >= 0),
                        pixelFormat TEXT NOT NULL CHECK (length(pixelFormat) BETWEEN 1 AND 8),
                        width INTEGER NOT NULL CHECK (width > 0),
                        height INTEGER NOT NULL CHECK (height > 0),
                        fieldOfViewDegrees REAL,
                        maxZoomFactor REAL NOT NULL CHECK (maxZoomFactor >= 1),
                        upscaleThresholdZoomFactor REAL,
                        binned INTEGER NOT NULL CHECK (binned IN (0, 1)),
                        bitDepth INTEGER NOT NULL,
                        PRIMARY KEY (deviceId, position)
                    );
                    INSERT INTO format_v4 SELECT deviceId, position, pixelFormat, width, height, fieldOfViewDegrees,
                        maxZoomFactor, upscaleThresholdZoomFactor, binned, bitDepth FROM format;
                    DROP TABLE format;
                    ALTER TABLE format_v4 RENAME TO format;
                    """)
        }
        migrator.registerMigration("v5: pressure policies") { db in
            try db.execute(
                sql: """
                    -- While the node's pressure is at `level` (1 fair .. 4 shutdown) or above, the
                    -- device runs at no more than frameRate.
                    CREATE TABLE pressurePolicy (
                        deviceId TEXT PRIMARY KEY NOT NULL REFERENCES device(id) ON DELETE CASCADE,
                        enabled INTEGER NOT NULL CHECK (enabled IN (0, 1)),
                        level INTEGER NOT NULL CHECK (level BETWEEN 1 AND 4),
                        frameRate REAL NOT NULL CHECK (frameRate > 0),
                        updatedAt INTEGER NOT NULL
                    );
                    """)
        }
        migrator.registerMigration("v6: keys, enrollment tokens, operators") { db in
            try db.execute(
                sql: """
                    -- Every key a node has been enrolled with. A node has at most one live key (not
                    -- revoked); revoked keys stay so that they can never be enrolled again.
                    CREATE TABLE nodeKey (
                        publicKey TEXT PRIMARY KEY NOT NULL CHECK (length(publicKey) = 40),
                        nodeId TEXT NOT NULL,
                        name TEXT NOT NULL,
                        enrolledAt INTEGER NOT NULL,
                        tokenKey TEXT NOT NULL,
                        revokedAt INTEGER,
                        revokedBy TEXT,
                        revokedReason TEXT
                    );
                    CREATE UNIQUE INDEX nodeKey_live ON nodeKey(nodeId) WHERE revokedAt IS NULL;
                    -- One-time enrollment tokens, by the public half of the key pair the token
                    -- carries (the secret half exists only in the token the admin was given).
                    CREATE TABLE enrollmentToken (
                        publicKey TEXT PRIMARY KEY NOT NULL CHECK (length(publicKey) = 40),
                        name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
                        createdBy TEXT NOT NULL,
                        createdAt INTEGER NOT NULL,
                        expiresAt INTEGER NOT NULL,
                        usedAt INTEGER,
                        usedByNode TEXT
                    );
                    CREATE TABLE operator (
                        name TEXT PRIMARY KEY NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
                        publicKey TEXT NOT NULL UNIQUE CHECK (length(publicKey) = 40),
                        role TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
                        addedAt INTEGER NOT NULL,
                        addedBy TEXT NOT NULL
                    );
                    """)
        }
        migrator.registerMigration("v7: consent") { db in
            try db.execute(
                sql: """
                    -- Each device's consent now. No foreign key: consent outlives a forgotten node, so a
                    -- device that comes back is not silently unlocked.
                    CREATE TABLE consent (
                        deviceId TEXT PRIMARY KEY NOT NULL,
                        state TEXT NOT NULL CHECK (state IN ('not_determined', 'authorized', 'denied', 'restricted')),
                        reason TEXT NOT NULL,
                        changedAt INTEGER NOT NULL,
                        changedBy TEXT NOT NULL
                    );
                    -- Every change, in order: who, when, why. Append-only, like the audit log.
                    CREATE TABLE consentHistory (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        deviceId TEXT NOT NULL,
                        at INTEGER NOT NULL,
                        actor TEXT NOT NULL,
                        action TEXT NOT NULL CHECK (action IN ('grant', 'deny', 'revoke', 'restrict')),
                        fromState TEXT NOT NULL,
                        toState TEXT NOT NULL,
                        reason TEXT NOT NULL CHECK (length(reason) > 0)
                    );
                    CREATE INDEX consentHistory_device ON consentHistory(deviceId, id);
                    CREATE TRIGGER consentHistory_no_update BEFORE UPDATE ON consentHistory
                        BEGIN SELECT RAISE(ABORT, 'the consent history is append-only'); END;
                    CREATE TRIGGER consentHistory_no_delete BEFORE DELETE ON consentHistory
                        BEGIN SELECT RAISE(ABORT, 'the consent history is append-only'); END;
                    """)
        }
        migrator.registerMigration("v8: node clocks") { db in
            try db.execute(
                sql: """
                    -- Each node's clock against fleet time as its agent last reported it (clock.md), kept
                    -- so that an offline node still shows what was last known and when.
                    CREATE TABLE nodeClock (
                        nodeId TEXT PRIMARY KEY NOT NULL REFERENCES node(id) ON DELETE CASCADE,
                        sync TEXT NOT NULL CHECK (sync IN ('unsynchronised', 'synchronising', 'locked')),
                        offsetNs INTEGER NOT NULL,
                        wallClockOffsetNs INTEGER NOT NULL,
                        driftPpm REAL NOT NULL,
                        uncertaintyNs INTEGER NOT NULL,
                        roundTripNs INTEGER NOT NULL,
                        coordinatorId TEXT NOT NULL,
                        reportedAt INTEGER NOT NULL
                    );
                    """)
        }
        migrator.registerMigration("v9: frame alignment") { db in
            try db.execute(
                sql: """
                    -- Whether each device is to be aligned to the fleet-time grid (clock.md, "Frame alignment"),
                    -- as an operator last set it and its agent accepted, so that the setting survives
                    -- restarts. The grid's origin is not kept: fleet time starts anew with each
                    -- coordinator, which chooses the origin again when it pushes the setting.
                    CREATE TABLE frameAlignment (
                        deviceId TEXT PRIMARY KEY NOT NULL REFERENCES device(id) ON DELETE CASCADE,
                        enabled INTEGER NOT NULL CHECK (enabled IN (0, 1)),
                        changedAt INTEGER NOT NULL,
                        changedBy TEXT NOT NULL CHECK (length(changedBy) > 0)
                    );
                    """)
        }
        migrator.registerMigration("v10: recordings index") { db in
            try db.execute(
                sql: """
                    -- A take: many devices recorded from one fleet-time instant (recordings.md). Files live
                    -- under `directory`; the rows below say what each file holds, so index and files
                    -- can be checked against each other.
                    CREATE TABLE take (
                        id TEXT PRIMARY KEY NOT NULL,
                        name TEXT NOT NULL,
                        state TEXT NOT NULL CHECK (state IN ('recording', 'stopped', 'failed')),
                        startFleetNs INTEGER NOT NULL,
                        stopFleetNs INTEGER,
                        directory TEXT NOT NULL,
                        createdAt INTEGER NOT NULL,
                        createdBy TEXT NOT NULL CHECK (length(createdBy) > 0),
                        stoppedAt INTEGER,
                        error TEXT NOT NULL DEFAULT ''
                    );
                    -- Each device of a take and its tally. No foreign key to device: a take outlives a
                    -- forgotten device.
                    CREATE TABLE takeDevice (
                        takeId TEXT NOT NULL REFERENCES take(id) ON DELETE CASCADE,
                        deviceId TEXT NOT NULL,
                        nodeId TEXT NOT NULL,
                        state TEXT NOT NULL CHECK (state IN ('waiting', 'recording', 'interrupted', 'stopped', 'failed')),
                        pixelFormat TEXT NOT NULL DEFAULT '',
                        width INTEGER NOT NULL DEFAULT 0,
                        height INTEGER NOT NULL DEFAULT 0,
                        frameRate REAL NOT NULL DEFAULT 0,
                        firstFleetNs INTEGER,
                        lastFleetNs INTEGER,
                        firstSequence INTEGER,
                        lastSequence INTEGER,
                        frames INTEGER NOT NULL DEFAULT 0,
                        bytes INTEGER NOT NULL DEFAULT 0,
                        dropsLate INTEGER NOT NULL DEFAULT 0,
                        dropsOutOfBuffers INTEGER NOT NULL DEFAULT 0,
                        dropsDiscontinuity INTEGER NOT NULL DEFAULT 0,
                        PRIMARY KEY (takeId, deviceId)
                    );
                    -- One Matroska file per device per segment. 'open' while written: after a crash those
                    -- are the files to repair.
                    CREATE TABLE segment (
                        takeId TEXT NOT NULL,
                        deviceId TEXT NOT NULL,
                        number INTEGER NOT NULL CHECK (number >= 1),
                        path TEXT NOT NULL UNIQUE,
                        state TEXT NOT NULL CHECK (state IN ('open', 'finished', 'repaired')),
                        sizeBytes INTEGER NOT NULL DEFAULT 0,
                        sha256 TEXT NOT NULL DEFAULT '',
                        firstFleetNs INTEGER,
                        lastFleetNs INTEGER,
                        firstSequence INTEGER,
                        lastSequence INTEGER,
                        frames INTEGER NOT NULL DEFAULT 0,
                        openedAt INTEGER NOT NULL,
                        closedAt INTEGER,
                        PRIMARY KEY (takeId, deviceId, number),
                        FOREIGN KEY (takeId, deviceId) REFERENCES takeDevice(takeId, deviceId) ON DELETE CASCADE
                    );
                    CREATE INDEX segment_open ON segment(state) WHERE state = 'open';
                    -- Timed metadata of a take: format, frame-rate and zoom changes, consent, interruptions,
                    -- drops, client metadata; each at its fleet time, the detail as JSON. The files carry
                    -- the same entries in their metadata track.
                    CREATE TABLE takeEvent (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        takeId TEXT NOT NULL REFERENCES take(id) ON DELETE CASCADE,
                        deviceId TEXT NOT NULL DEFAULT '',
                        fleetNs INTEGER NOT NULL,
                        kind TEXT NOT NULL CHECK (length(kind) > 0),
                        detail TEXT NOT NULL DEFAULT '{}'
                    );
                    CREATE INDEX takeEvent_take ON takeEvent(takeId, fleetNs);
                    """)
        }
        migrator.registerMigration("v11: recording path") { db in
            try db.execute(
                sql: """
                    -- Where each device's part of a take stands on the recording path: the agent process it
                    -- came from (a new one means the agent restarted and its sequence numbers began anew),
                    -- the offset that continues the take's sequence across such restarts, and how it ended.
                    ALTER TABLE takeDevice ADD COLUMN agentInstance TEXT NOT NULL DEFAULT '';
                    ALTER TABLE takeDevice ADD COLUMN sequenceOffset INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE takeDevice ADD COLUMN endReason TEXT NOT NULL DEFAULT '';
                    ALTER TABLE takeDevice ADD COLUMN withheldFrames INTEGER NOT NULL DEFAULT 0;
                    """)
        }
        migrator.registerMigration("v12: external cameras") { db in
            // A third party's camera (SourceKind.external) may be registered.
            try widenDeviceKinds(
                db, migration: "v12", from: "CHECK (kind IN ('synthetic', 'v4l2'))",
                to: "CHECK (kind IN ('synthetic', 'v4l2', 'external'))")
        }
        migrator.registerMigration("v13: rejection counts") { db in
            // Rejected input per endpoint and reason, kept across coordinator restarts like the
            // frame counters (written with them, every two seconds and at shutdown).
            try db.execute(
                sql: """
                    CREATE TABLE rejectionCount (
                        endpoint TEXT NOT NULL CHECK (length(endpoint) > 0),
                        reason TEXT NOT NULL CHECK (length(reason) > 0),
                        count INTEGER NOT NULL CHECK (count >= 0),
                        PRIMARY KEY (endpoint, reason)
                    ) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v14: enrollment token uses") { db in
            // A token may admit several agents (enrollment.md, "Multi-use tokens"), each use kept
            // as a row of its own; a token an admin revokes admits nobody more. Tokens used
            // before this migration become one-use tokens with their one use.
            try db.execute(
                sql: """
                    ALTER TABLE enrollmentToken ADD COLUMN uses INTEGER NOT NULL DEFAULT 1 CHECK (uses BETWEEN 1 AND 10000);
                    -- 'name': every node is called `name`; 'prefix': `name` is a prefix, and a node is
                    -- called what its agent asks for, else the prefix and the next free number.
                    ALTER TABLE enrollmentToken ADD COLUMN naming TEXT NOT NULL DEFAULT 'name' CHECK (naming IN ('name', 'prefix'));
                    ALTER TABLE enrollmentToken ADD COLUMN nextNumber INTEGER NOT NULL DEFAULT 1 CHECK (nextNumber >= 1);
                    ALTER TABLE enrollmentToken ADD COLUMN revokedAt INTEGER;
                    ALTER TABLE enrollmentToken ADD COLUMN revokedBy TEXT;
                    ALTER TABLE enrollmentToken ADD COLUMN revokedReason TEXT;
                    CREATE TABLE enrollmentTokenUse (
                        tokenKey TEXT NOT NULL REFERENCES enrollmentToken(publicKey),
                        number INTEGER NOT NULL CHECK (number >= 1),
                        nodeId TEXT NOT NULL CHECK (length(nodeId) > 0),
                        nodeKey TEXT NOT NULL UNIQUE CHECK (length(nodeKey) = 40),
                        name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
                        usedAt INTEGER NOT NULL,
                        PRIMARY KEY (tokenKey, number),
                        -- A token admits each node once: a revoked node cannot let itself back in with it.
                        UNIQUE (tokenKey, nodeId)
                    );
                    INSERT INTO enrollmentTokenUse (tokenKey, number, nodeId, nodeKey, name, usedAt)
                        SELECT t.publicKey, 1, k.nodeId, k.publicKey, k.name, t.usedAt
                        FROM enrollmentToken t JOIN nodeKey k ON k.tokenKey = t.publicKey
                        WHERE t.usedAt IS NOT NULL;
                    CREATE TRIGGER enrollmentTokenUse_withinUses BEFORE INSERT ON enrollmentTokenUse
                        WHEN NEW.number > (SELECT uses FROM enrollmentToken WHERE publicKey = NEW.tokenKey)
                        BEGIN SELECT RAISE(ABORT, 'an enrollment token cannot admit more agents than its uses'); END;
                    CREATE TRIGGER enrollmentTokenUse_no_update BEFORE UPDATE ON enrollmentTokenUse
                        BEGIN SELECT RAISE(ABORT, 'enrollment token uses are append-only'); END;
                    CREATE TRIGGER enrollmentTokenUse_no_delete BEFORE DELETE ON enrollmentTokenUse
                        BEGIN SELECT RAISE(ABORT, 'enrollment token uses are append-only'); END;
                    """)
        }
        migrator.registerMigration("v15: captured counts") { db in
            // What each device captured, counted by its agent whether or not the frames crossed
            // the network (frames are sent only on demand): the total of the agent processes
            // before the current one, and the current one's own counts, so a coordinator
            // restart neither loses nor counts twice what that process reported.
            try db.execute(
                sql: """
                    CREATE TABLE deviceCaptureCount (
                        deviceId TEXT PRIMARY KEY NOT NULL REFERENCES device(id) ON DELETE CASCADE,
                        agentInstance TEXT NOT NULL,
                        earlierFrames INTEGER NOT NULL CHECK (earlierFrames >= 0),
                        earlierBytes INTEGER NOT NULL CHECK (earlierBytes >= 0),
                        runFrames INTEGER NOT NULL CHECK (runFrames >= 0),
                        runBytes INTEGER NOT NULL CHECK (runBytes >= 0)
                    ) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v16: takes recorded on agents") { db in
            // A take's parts are written by the coordinator or by the agents (recordings.md,
            // "Where takes are written"). An agent-held segment's `path` is on its node's disk;
            // `collectedPath` is the coordinator's checksum-verified copy once collected. Each
            // segment keeps the drops within its own span.
            try db.execute(
                sql: """
                    ALTER TABLE take ADD COLUMN store TEXT NOT NULL DEFAULT 'coordinator' CHECK (store IN ('coordinator', 'agent'));
                    ALTER TABLE take ADD COLUMN collectError TEXT NOT NULL DEFAULT '';
                    ALTER TABLE segment ADD COLUMN nodeId TEXT CHECK (nodeId IS NULL OR length(nodeId) > 0);
                    ALTER TABLE segment ADD COLUMN collectedPath TEXT;
                    ALTER TABLE segment ADD COLUMN collectedAt INTEGER;
                    ALTER TABLE segment ADD COLUMN dropsLate INTEGER NOT NULL DEFAULT 0 CHECK (dropsLate >= 0);
                    ALTER TABLE segment ADD COLUMN dropsOutOfBuffers INTEGER NOT NULL DEFAULT 0 CHECK (dropsOutOfBuffers >= 0);
                    ALTER TABLE segment ADD COLUMN dropsDiscontinuity INTEGER NOT NULL DEFAULT 0 CHECK (dropsDiscontinuity >= 0);
                    CREATE INDEX segment_uncollected ON segment(takeId) WHERE nodeId IS NOT NULL AND collectedPath IS NULL;
                    """)
        }
        migrator.registerMigration("v17: encoded takes") { db in
            // A take's codec (recordings.md, "Codecs"): what was asked, a part's own where it was
            // given one (codec NULL: the take's), and per part the encoder that wrote it and the
            // camera format it encoded from. Frames a take's encoder could
            // not keep up with are a drop reason of their own, counted wherever drops are.
            try db.execute(
                sql: """
                    ALTER TABLE take ADD COLUMN codec TEXT NOT NULL DEFAULT 'raw' CHECK (codec IN ('raw', 'ffv1', 'h264', 'hevc'));
                    ALTER TABLE take ADD COLUMN quality INTEGER CHECK (quality IS NULL OR quality BETWEEN 0 AND 51);
                    ALTER TABLE take ADD COLUMN bitrate INTEGER NOT NULL DEFAULT 0 CHECK (bitrate >= 0);
                    ALTER TABLE take ADD COLUMN gop INTEGER NOT NULL DEFAULT 0 CHECK (gop >= 0);
                    ALTER TABLE takeDevice ADD COLUMN encoder TEXT NOT NULL DEFAULT '';
                    ALTER TABLE takeDevice ADD COLUMN codec TEXT CHECK (codec IS NULL OR codec IN ('raw', 'ffv1', 'h264', 'hevc'));
                    ALTER TABLE takeDevice ADD COLUMN quality INTEGER CHECK (quality IS NULL OR quality BETWEEN 0 AND 51);
                    ALTER TABLE takeDevice ADD COLUMN bitrate INTEGER NOT NULL DEFAULT 0 CHECK (bitrate >= 0);
                    ALTER TABLE takeDevice ADD COLUMN gop INTEGER NOT NULL DEFAULT 0 CHECK (gop >= 0);
                    ALTER TABLE takeDevice ADD COLUMN sourcePixelFormat TEXT NOT NULL DEFAULT '';
                    ALTER TABLE takeDevice ADD COLUMN dropsEncoderLate INTEGER NOT NULL DEFAULT 0 CHECK (dropsEncoderLate >= 0);
                    ALTER TABLE segment ADD COLUMN dropsEncoderLate INTEGER NOT NULL DEFAULT 0 CHECK (dropsEncoderLate >= 0);
                    ALTER TABLE device ADD COLUMN dropsEncoderLate INTEGER NOT NULL DEFAULT 0 CHECK (dropsEncoderLate >= 0);
                    ALTER TABLE node ADD COLUMN encoders TEXT NOT NULL DEFAULT '';
                    """)
        }
        migrator.registerMigration("v18: dashboard sessions") { db in
            // The web dashboard's browsers (issue: web dashboard): one-time sign-in links and
            // the sessions they open, each for one operator. Secrets are kept only as SHA-256
            // hashes; removing an operator removes their links and sessions with them.
            try db.execute(
                sql: """
                    CREATE TABLE dashboardSignIn (
                        tokenHash TEXT PRIMARY KEY NOT NULL CHECK (length(tokenHash) = 64),
                        operatorName TEXT NOT NULL REFERENCES operator(name) ON DELETE CASCADE ON UPDATE CASCADE,
                        createdAt INTEGER NOT NULL,
                        expiresAt INTEGER NOT NULL CHECK (expiresAt > createdAt),
                        createdBy TEXT NOT NULL,
                        usedAt INTEGER
                    ) WITHOUT ROWID;
                    CREATE TABLE dashboardSession (
                        id TEXT PRIMARY KEY NOT NULL CHECK (length(id) > 0),
                        secretHash TEXT NOT NULL UNIQUE CHECK (length(secretHash) = 64),
                        operatorName TEXT NOT NULL REFERENCES operator(name) ON DELETE CASCADE ON UPDATE CASCADE,
                        csrfToken TEXT NOT NULL CHECK (length(csrfToken) > 0),
                        createdAt INTEGER NOT NULL,
                        expiresAt INTEGER NOT NULL CHECK (expiresAt > createdAt),
                        lastSeenAt INTEGER NOT NULL,
                        endedAt INTEGER,
                        endedBy TEXT,
                        peer TEXT NOT NULL DEFAULT '',
                        userAgent TEXT NOT NULL DEFAULT ''
                    ) WITHOUT ROWID;
                    CREATE INDEX dashboardSession_operator ON dashboardSession(operatorName);
                    """)
        }
        migrator.registerMigration("v19: stills") { db in
            // Synchronised stills (stills.md): one row per request, one per camera asked, one
            // per picture. A picture is written on its camera's host (agentPath) and copied to
            // the coordinator (storedPath, once its SHA-256 matched). Removing the request
            // removes the rest.
            try db.execute(
                sql: """
                    CREATE TABLE still (
                        id TEXT PRIMARY KEY NOT NULL CHECK (length(id) > 0),
                        name TEXT NOT NULL,
                        requestedFleetNs INTEGER NOT NULL,
                        encoding TEXT NOT NULL CHECK (encoding IN ('png', 'jpeg')),
                        bracket TEXT NOT NULL DEFAULT '',
                        directory TEXT NOT NULL,
                        createdAt INTEGER NOT NULL,
                        createdBy TEXT NOT NULL,
                        storedAt INTEGER
                    ) WITHOUT ROWID;
                    CREATE TABLE stillDevice (
                        stillId TEXT NOT NULL REFERENCES still(id) ON DELETE CASCADE,
                        deviceId TEXT NOT NULL CHECK (length(deviceId) > 0),
                        nodeId TEXT NOT NULL,
                        state TEXT NOT NULL CHECK (state IN ('capturing', 'collecting', 'stored', 'failed')),
                        error TEXT NOT NULL DEFAULT '',
                        awayNs INTEGER NOT NULL DEFAULT 0 CHECK (awayNs >= 0),
                        PRIMARY KEY (stillId, deviceId)
                    ) WITHOUT ROWID;
                    CREATE TABLE stillImage (
                        stillId TEXT NOT NULL,
                        deviceId TEXT NOT NULL,
                        number INTEGER NOT NULL CHECK (number >= 1),
                        fileName TEXT NOT NULL CHECK (length(fileName) > 0),
                        agentPath TEXT NOT NULL,
                        sizeBytes INTEGER NOT NULL CHECK (sizeBytes >= 0),
                        sha256 TEXT NOT NULL CHECK (length(sha256) = 64),
                        mediaType TEXT NOT NULL,
                        sidecarJson TEXT NOT NULL,
                        requestedFleetNs INTEGER NOT NULL,
                        fleetTimeNs INTEGER NOT NULL,
                        spreadNs INTEGER NOT NULL,
                        ev REAL NOT NULL DEFAULT 0,
                        width INTEGER NOT NULL,
                        height INTEGER NOT NULL,
                        pixelFormat TEXT NOT NULL,
                        storedPath TEXT,
                        storedAt INTEGER,
                        PRIMARY KEY (stillId, deviceId, number),
                        FOREIGN KEY (stillId, deviceId) REFERENCES stillDevice(stillId, deviceId) ON DELETE CASCADE
                    ) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v20: detection settings") { db in
            // What each device's agent looks for in its frames (detection.md), pushed again at
            // every registration; removing the device removes them.
            try db.execute(
                sql: """
                    CREATE TABLE deviceDetection (
                        deviceId TEXT PRIMARY KEY NOT NULL REFERENCES device(id) ON DELETE CASCADE,
                        codes TEXT NOT NULL,
                        faces INTEGER NOT NULL CHECK (faces IN (0, 1)),
                        regionX REAL NOT NULL CHECK (regionX >= 0 AND regionX < 1),
                        regionY REAL NOT NULL CHECK (regionY >= 0 AND regionY < 1),
                        regionWidth REAL NOT NULL CHECK (regionWidth > 0 AND regionWidth <= 1),
                        regionHeight REAL NOT NULL CHECK (regionHeight > 0 AND regionHeight <= 1),
                        framesPerSecond REAL NOT NULL CHECK (framesPerSecond > 0 AND framesPerSecond <= 60),
                        changedAt INTEGER NOT NULL,
                        changedBy TEXT NOT NULL
                    ) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v21: device optics") { db in
            // What operators know of a device's lens that V4L2 does not say (detection.md,
            // "Scan set-up"); NULL = not known. Removing the device removes it.
            try db.execute(
                sql: """
                    CREATE TABLE deviceOptics (
                        deviceId TEXT PRIMARY KEY NOT NULL REFERENCES device(id) ON DELETE CASCADE,
                        fieldOfViewDegrees REAL CHECK (fieldOfViewDegrees > 0 AND fieldOfViewDegrees < 180),
                        minimumFocusMillimetres REAL CHECK (minimumFocusMillimetres > 0),
                        changedAt INTEGER NOT NULL,
                        changedBy TEXT NOT NULL
                    ) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v22: take sync reports") { db in
            // What a take was asked to keep to (recordings.md, "Sync and integrity"), from its
            // start; its sync report (a serialized TakeSyncReport) and verdict once it ended.
            try db.execute(
                sql: """
                    CREATE TABLE takeSync (
                        takeId TEXT PRIMARY KEY NOT NULL REFERENCES take(id) ON DELETE CASCADE,
                        maxSpreadNs INTEGER NOT NULL DEFAULT 0 CHECK (maxSpreadNs >= 0),
                        noDrops INTEGER NOT NULL DEFAULT 0 CHECK (noDrops IN (0, 1)),
                        clocksLocked INTEGER NOT NULL DEFAULT 0 CHECK (clocksLocked IN (0, 1)),
                        inPhase INTEGER NOT NULL DEFAULT 0 CHECK (inPhase IN (0, 1)),
                        verdict TEXT NOT NULL DEFAULT 'recording' CHECK (verdict IN ('recording', 'reported', 'certified', 'failed')),
                        report BLOB,
                        reportedAt INTEGER,
                        CHECK ((verdict = 'recording') = (report IS NULL))
                    ) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v23: sensor streams") { db in
            // A sensor stream (SourceKind.sensor, sensors.md) and a microphone (microphones.md)
            // register as devices.
            try widenDeviceKinds(
                db, migration: "v23", from: "CHECK (kind IN ('synthetic', 'v4l2', 'external'))",
                to: "CHECK (kind IN ('synthetic', 'v4l2', 'external', 'sensor', 'syntheticMicrophone'))")
        }
        migrator.registerMigration("v24: take sensor streams") { db in
            // Sensor streams a take records into its cameras' files (sensors.md, "In takes").
            // The device may be forgotten later; the take keeps naming it.
            try db.execute(
                sql: """
                    CREATE TABLE takeSensor (
                        takeId TEXT NOT NULL REFERENCES take(id) ON DELETE CASCADE,
                        deviceId TEXT NOT NULL CHECK (length(deviceId) > 0),
                        nodeId TEXT NOT NULL,
                        PRIMARY KEY (takeId, deviceId)
                    );
                    """)
        }
        migrator.registerMigration("v25: ALSA microphones") { db in
            // An ALSA capture device registers as a device of its own kind (microphones.md).
            try widenDeviceKinds(
                db, migration: "v25", from: "CHECK (kind IN ('synthetic', 'v4l2', 'external', 'sensor', 'syntheticMicrophone'))",
                to: "CHECK (kind IN ('synthetic', 'v4l2', 'external', 'sensor', 'syntheticMicrophone', 'alsa'))")
        }
        migrator.registerMigration("v26: audio processing") { db in
            // Each microphone's processing (microphones.md, "Processing"), pushed again at every
            // registration; removing the device removes it. No row: none.
            try db.execute(
                sql: """
                    CREATE TABLE deviceAudioProcessing (
                        deviceId TEXT PRIMARY KEY NOT NULL REFERENCES device(id) ON DELETE CASCADE,
                        highPassHertz REAL NOT NULL CHECK (highPassHertz = 0 OR (highPassHertz >= 20 AND highPassHertz <= 500)),
                        noiseSuppressionDecibels REAL NOT NULL CHECK (noiseSuppressionDecibels = 0 OR (noiseSuppressionDecibels >= 1 AND noiseSuppressionDecibels <= 60)),
                        gainDecibels REAL NOT NULL CHECK (gainDecibels >= -40 AND gainDecibels <= 40),
                        changedAt INTEGER NOT NULL,
                        changedBy TEXT NOT NULL
                    ) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v27: GenICam cameras") { db in
            // A GigE Vision or USB3 Vision camera registers as a device of its own kind (device-model.md).
            try widenDeviceKinds(
                db, migration: "v27", from: "CHECK (kind IN ('synthetic', 'v4l2', 'external', 'sensor', 'syntheticMicrophone', 'alsa'))",
                to: "CHECK (kind IN ('synthetic', 'v4l2', 'external', 'sensor', 'syntheticMicrophone', 'alsa', 'genicam'))")
        }
        migrator.registerMigration("v28: hardware-line triggers") { db in
            try db.execute(
                sql: """
                    -- A camera wired to others (clock.md, "Hardware-line triggers"): the input line it
                    -- exposes on and what drives it (a device id, or '' for an external generator),
                    -- and the output line it drives with its exposure signal. '' where not wired.
                    ALTER TABLE frameAlignment ADD COLUMN triggerLine TEXT NOT NULL DEFAULT '';
                    ALTER TABLE frameAlignment ADD COLUMN lineSourceDeviceId TEXT NOT NULL DEFAULT '';
                    ALTER TABLE frameAlignment ADD COLUMN outputLine TEXT NOT NULL DEFAULT '';
                    """)
        }
        migrator.registerMigration("v29: pre-roll") { db in
            try db.execute(
                sql: """
                    -- A device's pre-roll (recordings.md, "Pre-roll"), pushed again at every
                    -- registration; removing the device removes it. No row: off.
                    CREATE TABLE devicePreRoll (
                        deviceId TEXT PRIMARY KEY NOT NULL REFERENCES device(id) ON DELETE CASCADE,
                        milliseconds INTEGER NOT NULL CHECK (milliseconds >= 0 AND milliseconds <= 60000),
                        budgetBytes INTEGER NOT NULL CHECK (budgetBytes >= 0),
                        changedAt INTEGER NOT NULL,
                        changedBy TEXT NOT NULL
                    ) WITHOUT ROWID;
                    -- How long before its instant a take starts; its startFleetNs is the earlier time.
                    ALTER TABLE take ADD COLUMN preRollMs INTEGER NOT NULL DEFAULT 0 CHECK (preRollMs >= 0);
                    """)
        }
        migrator.registerMigration("v30: moments") { db in
            try db.execute(
                sql: """
                    -- A moment (recordings.md, "Moments"): a still of its cameras at one instant and a
                    -- take around it. The take and the still are deleted on their own; the moment
                    -- then names what is gone.
                    CREATE TABLE moment (
                        id TEXT PRIMARY KEY NOT NULL,
                        name TEXT NOT NULL,
                        instantFleetNs INTEGER NOT NULL,
                        beforeMs INTEGER NOT NULL CHECK (beforeMs >= 0),
                        afterMs INTEGER NOT NULL CHECK (afterMs >= 0),
                        takeId TEXT NOT NULL,
                        stillId TEXT NOT NULL,
                        deviceIds TEXT NOT NULL,
                        createdAt INTEGER NOT NULL,
                        createdBy TEXT NOT NULL,
                        trigger TEXT NOT NULL
                    ) WITHOUT ROWID;
                    CREATE INDEX momentByInstant ON moment(instantFleetNs);
                    """)
        }
        migrator.registerMigration("v31: moment rules") { db in
            try db.execute(
                sql: """
                    -- Rules that take moments when something happens (recordings.md, "Moments by
                    -- rule"): what it waits for, on which device, the moments it takes, and what it
                    -- has done. '' where a field does not apply.
                    CREATE TABLE momentRule (
                        name TEXT PRIMARY KEY NOT NULL,
                        sourceDeviceId TEXT NOT NULL,
                        onWhat TEXT NOT NULL CHECK (onWhat IN ('code', 'face', 'above', 'below', 'text')),
                        symbology TEXT NOT NULL DEFAULT '',
                        value TEXT NOT NULL DEFAULT '',
                        channel TEXT NOT NULL DEFAULT '',
                        level REAL NOT NULL DEFAULT 0,
                        text TEXT NOT NULL DEFAULT '',
                        deviceIds TEXT NOT NULL DEFAULT '',
                        allCameras INTEGER NOT NULL DEFAULT 0 CHECK (allCameras IN (0, 1)),
                        beforeMs INTEGER NOT NULL CHECK (beforeMs >= 0 AND beforeMs <= 60000),
                        afterMs INTEGER NOT NULL CHECK (afterMs >= 0 AND afterMs <= 60000),
                        rearmMs INTEGER NOT NULL CHECK (rearmMs >= 0),
                        jpeg INTEGER NOT NULL DEFAULT 0 CHECK (jpeg IN (0, 1)),
                        createdAt INTEGER NOT NULL,
                        createdBy TEXT NOT NULL,
                        fired INTEGER NOT NULL DEFAULT 0 CHECK (fired >= 0),
                        missed INTEGER NOT NULL DEFAULT 0 CHECK (missed >= 0),
                        refused INTEGER NOT NULL DEFAULT 0 CHECK (refused >= 0),
                        lastMomentId TEXT NOT NULL DEFAULT '',
                        lastFiredAt INTEGER NOT NULL DEFAULT 0,
                        lastProblem TEXT NOT NULL DEFAULT ''
                    ) WITHOUT ROWID;
                    -- A rule's moment: what the rule saw.
                    ALTER TABLE moment ADD COLUMN cause TEXT NOT NULL DEFAULT '';
                    """)
        }
        migrator.registerMigration("v32: stabilised takes") { db in
            // Whether a take's (or a part's own) encoder steadied the picture first
            // (recordings.md, "Stabilisation").
            try db.execute(
                sql: """
                    ALTER TABLE take ADD COLUMN stabilisation TEXT NOT NULL DEFAULT 'off' CHECK (stabilisation IN ('off', 'deshake'));
                    ALTER TABLE takeDevice ADD COLUMN stabilisation TEXT NOT NULL DEFAULT 'off' CHECK (stabilisation IN ('off', 'deshake'));
                    """)
        }
        migrator.registerMigration("v33: colour and depth") { db in
            // A format's colour description (`primaries/transfer/matrix/range`, empty: not
            // declared) and a depth format's metres per unit; a take's part's significant bits
            // and colour as recorded (frames.md, "Colour and depth").
            try db.execute(
                sql: """
                    ALTER TABLE format ADD COLUMN colour TEXT NOT NULL DEFAULT '';
                    ALTER TABLE format ADD COLUMN depthUnitMetres REAL;
                    ALTER TABLE takeDevice ADD COLUMN bitDepth INTEGER NOT NULL DEFAULT 8;
                    ALTER TABLE takeDevice ADD COLUMN colour TEXT NOT NULL DEFAULT '';
                    ALTER TABLE takeDevice ADD COLUMN depthUnitMetres REAL;
                    """)
        }
        migrator.registerMigration("v34: auto-framing") { db in
            // A camera's auto-framing settings with its detection (detection.md, "Auto-framing"):
            // `margin/speed/hold/smallest crop`, empty: off.
            try db.execute(sql: "ALTER TABLE deviceDetection ADD COLUMN framing TEXT NOT NULL DEFAULT ''")
        }
        migrator.registerMigration("v35: encoded pre-roll") { db in
            // A camera's pre-roll kept encoded on its host (recordings.md, "Encoded pre-roll"):
            // the codec and its settings, as a take part's own; codec NULL: raw frames.
            try db.execute(
                sql: """
                    ALTER TABLE devicePreRoll ADD COLUMN codec TEXT CHECK (codec IS NULL OR codec IN ('ffv1', 'h264', 'hevc'));
                    ALTER TABLE devicePreRoll ADD COLUMN quality INTEGER CHECK (quality IS NULL OR quality BETWEEN 0 AND 51);
                    ALTER TABLE devicePreRoll ADD COLUMN bitrate INTEGER NOT NULL DEFAULT 0 CHECK (bitrate >= 0);
                    ALTER TABLE devicePreRoll ADD COLUMN gop INTEGER NOT NULL DEFAULT 0 CHECK (gop >= 0);
                    """)
        }
        migrator.registerMigration("v36: pre-roll on disk") { db in
            // An encoded pre-roll's disk budget (recordings.md, "On disk"); 0: none.
            try db.execute(sql: "ALTER TABLE devicePreRoll ADD COLUMN diskBudgetBytes INTEGER NOT NULL DEFAULT 0 CHECK (diskBudgetBytes >= 0)")
        }
        migrator.registerMigration("v37: storage destinations and segment copies") { db in
            try db.execute(
                sql: """
                    -- Where takes are offloaded to (recordings.md, "Offload"): an rclone backend and
                    -- its settings. The settings that are secrets are not here (a database backup
                    -- travels): secretKeys names them; their values are in DATA/keys/storage.
                    CREATE TABLE storageDestination (
                        name TEXT PRIMARY KEY NOT NULL CHECK (length(name) BETWEEN 1 AND 32),
                        backend TEXT NOT NULL CHECK (backend <> ''),
                        optionsJson TEXT NOT NULL DEFAULT '{}',
                        secretKeys TEXT NOT NULL DEFAULT '',
                        root TEXT NOT NULL DEFAULT '',
                        -- Policy: every take is offloaded here once it is stored.
                        offloadWhenStopped INTEGER NOT NULL DEFAULT 0,
                        createdAt INTEGER NOT NULL,
                        createdBy TEXT NOT NULL
                    );
                    -- A segment's copy on a destination (`recordings offload`): the last attempt's
                    -- outcome. verified: the destination holds it, proved by its SHA-256 (proof:
                    -- the store's own checksum, or the object read back). nodeId: who sent it
                    -- (NULL: the coordinator). A destination removed keeps its copies' rows: the
                    -- files are still there.
                    CREATE TABLE segmentCopy (
                        takeId TEXT NOT NULL,
                        deviceId TEXT NOT NULL,
                        number INTEGER NOT NULL,
                        destination TEXT NOT NULL,
                        objectPath TEXT NOT NULL,
                        state TEXT NOT NULL CHECK (state IN ('verified', 'failed', 'held_back')),
                        proof TEXT NOT NULL DEFAULT '',
                        sentBytes INTEGER NOT NULL DEFAULT 0,
                        error TEXT NOT NULL DEFAULT '',
                        nodeId TEXT,
                        at INTEGER NOT NULL,
                        PRIMARY KEY (takeId, deviceId, number, destination),
                        FOREIGN KEY (takeId, deviceId, number) REFERENCES segment (takeId, deviceId, number) ON DELETE CASCADE
                    );
                    """)
        }
        migrator.registerMigration("v38: offload on a schedule") { db in
            // Policy (recordings.md, "Offload"): "HH:MM" of the coordinator's local time, each
            // day every stored take not yet proved there is offloaded; '' for none.
            try db.execute(sql: "ALTER TABLE storageDestination ADD COLUMN offloadDailyAt TEXT NOT NULL DEFAULT ''")
        }
        return migrator
    }
}
