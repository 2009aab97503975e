import Foundation
import GRDB
import OpenCoreData
import Testing
import _TestSupport

/// Persistent history in stores Apple's Core Data wrote (from `../shared/corpus/`, skipped without it): read through
/// `NSPersistentHistoryChangeRequest` with the store's cached model, and the same table layout in the stores this
/// project writes.
@Suite(.enabled(if: Requirement.corpusIsPresent, "needs ../shared/corpus beside the checkout")) struct AppleHistoryTests {
    let dir = TemporaryDirectory()

    /// The SQL of the history tables and indexes in a database, whitespace-normalized, by name.
    static func historySchema(_ url: URL) throws -> [String: String] {
        var configuration = Configuration()
        configuration.readonly = true
        let queue = try DatabaseQueue(path: url.path, configuration: configuration)
        let rows = try queue.read { db in
            try Row.fetchAll(
                db, sql: "SELECT name, sql FROM sqlite_master WHERE tbl_name IN ('ATRANSACTION', 'ACHANGE', 'ATRANSACTIONSTRING')")
        }
        var result: [String: String] = [:]
        for row in rows {
            let sql: String = row[1] ?? ""
            result[row[0]] = sql.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        }
        return result
    }

    @Test func notesHistoryReadsWithTheCachedModel() throws {
        let store = try AppleStoreTests.corpusCopy("apple-ios-notes/NoteStore.sqlite", into: dir)
        let model = try NSManagedObjectModel.cachedModel(ofStoreAt: store)
        let container = AppleStoreTests.readOnlyContainer(store, model)
        try container.loadPersistentStores()
        let context = container.newBackgroundContext()
        let result = try context.execute(NSPersistentHistoryChangeRequest.fetchHistory(after: nil as NSPersistentHistoryToken?))
        let transactions = try #require((result as? NSPersistentHistoryResult)?.result as? [NSPersistentHistoryTransaction])
        // What SQL counts directly.
        var configuration = Configuration()
        configuration.readonly = true
        let (transactionCount, changeCounts) = try DatabaseQueue(path: store.path, configuration: configuration).read { db in
            (
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM ATRANSACTION") ?? 0,
                try Dictionary(
                    uniqueKeysWithValues: Row.fetchAll(db, sql: "SELECT ZCHANGETYPE, COUNT(*) FROM ACHANGE GROUP BY 1").map {
                        ($0[0] as Int, $0[1] as Int)
                    })
            )
        }
        #expect(transactions.count == transactionCount && transactionCount > 0)
        let changes = transactions.flatMap { $0.changes ?? [] }
        for (type, count) in changeCounts { #expect(changes.filter { $0.changeType.rawValue == type }.count == count) }
        #expect(zip(transactions, transactions.dropFirst()).allSatisfy { $0.transactionNumber < $1.transactionNumber })
        // The app's names, interned in ATRANSACTIONSTRING.
        let edit = try #require(transactions.first { $0.contextName == "ViewContext" })
        #expect(edit.bundleID == "com.apple.mobilenotes" && edit.processID == "MobileNotes")
        // Each note edit (in the app's view context) updates the note's data and its cloud state's version and date.
        let noteData = changes.filter { $0.changedObjectID.entity.name == "ICNoteData" && $0.changeType == .update }
        #expect(!noteData.isEmpty && noteData.allSatisfy { $0.updatedProperties?.map(\.name) == ["data"] })
        let edits = transactions.filter { transaction in
            transaction.contextName == "ViewContext"
                && transaction.changes?.contains { $0.changedObjectID.entity.name == "ICNoteData" && $0.changeType == .update } == true
        }
        let versions = edits.flatMap { $0.changes ?? [] }.filter {
            $0.changedObjectID.entity.name == "ICCloudState" && $0.changeType == .update
        }
        #expect(!versions.isEmpty)
        #expect(
            versions.allSatisfy { Set($0.updatedProperties?.map(\.name) ?? []) == ["currentLocalVersion", "localVersionDate"] },
            "\(versions.map { ($0.transaction?.transactionNumber ?? 0, $0.updatedProperties?.map(\.name) ?? []) })")
        // The objects are the store's: an inserted one that is still there reads.
        let inserted = try #require(changes.last { $0.changeType == .insert && $0.changedObjectID.entity.name == "ICNoteData" })
        #expect(try context.performAndWait { try context.existingObject(with: inserted.changedObjectID).value(forKey: "data") } != nil)
    }

    @Test func ourHistoryTablesHaveApplesLayout() throws {
        let apple = AppleStoreTests.corpus.appendingPathComponent("coredataplus-samplemodel2/SampleModel2_V1.sqlite")
        try #require(FileManager.default.fileExists(atPath: apple.path), "the corpus is there")
        let url = dir.file("Ours.sqlite")
        let model = try NSManagedObjectModel { Entity("Item") { Attribute("name", .string) } }
        let description = NSPersistentStoreDescription(url: url)
        description.setOption(true as NSNumber, forKey: NSPersistentHistoryTrackingKey)
        let container = NSPersistentContainer(name: "Ours", managedObjectModel: model)
        container.persistentStoreDescriptions = [description]
        try container.loadPersistentStores()
        try container.removeStores()
        let ours = try Self.historySchema(url)
        #expect(ours.count == 11)
        #expect(ours == (try Self.historySchema(apple)))
    }
}
