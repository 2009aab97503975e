import Foundation
import GRDB
import OpenCoreDataModel
import Testing
import _TestSupport

@testable import OpenCoreDataStore

/// Rows read by ID (a fault, a batch of a batched fetch) come back as snapshots of the IDs asked for.
@Suite struct RowsByIDTests {
    @Test func snapshotsCarryTheIDsAskedForAndARowOfASubentityNamesItsEntity() throws {
        let model = try NSManagedObjectModel {
            Entity("Item") { Attribute("name", .string) }
            Entity("Shape", abstract: true) { Attribute("area", .double) }
            Entity("Circle", parent: "Shape") { Attribute("radius", .double) }
        }
        let (item, shape, circle) = try (
            #require(model.entity(named: "Item")), #require(model.entity(named: "Shape")), #require(model.entity(named: "Circle"))
        )
        let folder = TemporaryDirectory()
        let store = try SQLiteStore(url: folder.file("ids.sqlite"), model: model)
        defer { try? store.close() }
        try store.writer.write { db in
            for pk in 1...5 {
                try db.execute(
                    sql: "INSERT INTO ZITEM (Z_PK, Z_ENT, Z_OPT, ZNAME) VALUES (?, ?, 1, ?)", arguments: [pk, item.entityID, "item \(pk)"])
            }
            try db.execute(
                sql: "INSERT INTO ZSHAPE (Z_PK, Z_ENT, Z_OPT, ZAREA, ZRADIUS) VALUES (1, ?, 1, 3.0, 1.0)", arguments: [circle.entityID])
        }
        let identifier = store.core.identifier
        // Asked out of key order, with a key that has no row.
        let ids = [4, 1, 9, 3].map { NSManagedObjectID(entity: item, storeIdentifier: identifier, primaryKey: Int64($0)) }
        let rows = try store.rows(for: ids)
        #expect(rows.count == 3)
        for id in ids where id.primaryKey != 9 {
            let row = try #require(rows[id], "no row for \(id)")
            #expect(row.objectID === id, "\(id): a new ID \(row.objectID) instead of the one asked for")
            #expect(row.values[0] == .attribute(.string("item \(id.primaryKey)")), "\(row.values)")
        }
        // Asked as a Shape, the row is a Circle's: its snapshot's ID names the Circle (and equals the ID asked for).
        let asShape = NSManagedObjectID(entity: shape, storeIdentifier: identifier, primaryKey: 1)
        let shapeRow = try #require(try store.rows(for: [asShape])[asShape])
        #expect(shapeRow.objectID.entity === circle && shapeRow.objectID == asShape, "\(shapeRow.objectID)")
        // An ID of another store names no row of this one.
        let foreign = NSManagedObjectID(entity: item, storeIdentifier: "another store", primaryKey: 1)
        #expect(try store.rows(for: [foreign])[foreign] == nil)
    }

    /// Reads by key go through the store's own reader connection, see every commit made before them, and take a reader
    /// of the pool when that connection is busy (another thread's fault): a fault never waits for another.
    @Test func readsByKeySeeTheLatestCommitAndDoNotWaitForABusyReader() throws {
        let model = try NSManagedObjectModel { Entity("Item") { Attribute("name", .string) } }
        let item = try #require(model.entity(named: "Item"))
        let folder = TemporaryDirectory()
        let store = try SQLiteStore(url: folder.file("reader.sqlite"), model: model)
        defer { try? store.close() }
        #expect(store.keyedReader != nil)
        let id = NSManagedObjectID(entity: item, storeIdentifier: store.core.identifier, primaryKey: 1)
        func name() throws -> SnapshotValue? { try store.rows(for: [id])[id]?.values[0] }
        #expect(try name() == nil)
        for (round, text) in ["first", "second"].enumerated() {
            try store.writer.write { db in
                try db.execute(
                    sql: "INSERT OR REPLACE INTO ZITEM (Z_PK, Z_ENT, Z_OPT, ZNAME) VALUES (1, ?, ?, ?)",
                    arguments: [item.entityID, round + 1, text])
            }
            #expect(try name() == .attribute(.string(text)))
        }
        // The reader busy: the read takes the pool's, and gives the same row.
        store.keyedReaderLock.lock()
        let whileBusy = Result { try name() }
        store.keyedReaderLock.unlock()
        #expect(try whileBusy.get() == .attribute(.string("second")))
        // Closed, the store refuses reads with an error that says so.
        try store.close()
        let closed = #expect(throws: CoreDataError.self) { try name() }
        #expect("\(String(describing: closed))".contains("closed"), "\(String(describing: closed))")
    }
}
