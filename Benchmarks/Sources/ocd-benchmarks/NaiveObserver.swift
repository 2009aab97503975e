import Dispatch
import Foundation
import GRDB
import OpenCoreData
import RawSQLite

final class SavedNote: @unchecked Sendable { var value: Notification? }

/// What a user writes today without this package: GRDB's ValueObservation re-fetches every row in order after each
/// write, and the new ID list is diffed against the old one (`CollectionDifference` with moves).
final class NaiveObserver {
    let pool: DatabasePool
    private let semaphore = DispatchSemaphore(value: 0)
    private let state = NaiveState()
    private var cancellable: AnyDatabaseCancellable?

    init(path: String) throws {
        pool = try DatabasePool(path: path)
        // The columns a table of these rows shows: the row, its section and its cell's text (an observation tracks
        // the columns it reads, so an edit of the text must be among them to be seen at all).
        let observation = ValueObservation.tracking { db in
            try ItemCell.fetchAll(db, sql: "SELECT id, section, title FROM item ORDER BY section, score, id")
        }
        let (semaphore, state) = (self.semaphore, self.state)
        cancellable = observation.start(
            in: pool, scheduling: .async(onQueue: DispatchQueue(label: "observation")),
            onError: { error in
                state.error = error
                semaphore.signal()
            }
        ) { rows in
            let ids = rows.map(\.id)
            // The first value is the initial list, not a change (and a diff from nothing costs O(n²)).
            let diff = state.ids.isEmpty ? CollectionDifference<Int64>([])! : ids.difference(from: state.ids).inferringMoves()
            state.ids = ids
            state.lastDiffCount = diff.count
            semaphore.signal()
        }
        try waitForDiff()  // the initial value
    }

    /// Waits for the diff that follows a write; throws the observation's error if it failed (it then stops).
    func waitForDiff() throws {
        semaphore.wait()
        if let error = state.error { throw error }
    }

    func cancel() { cancellable?.cancel() }
}

/// What a table's cell needs of a row (its ID, section and text), decoded by column index.
struct ItemCell: FetchableRecord, Sendable {
    let id: Int64
    let section: String
    let title: String?
    init(row: Row) {
        id = row[0]
        section = row[1]
        title = row[2]
    }
}

/// What a sectioned list needs of a row (its ID and section), as a GRDB user decodes it: by column index, the
/// fastest `FetchableRecord` initializer.
struct ItemKey: FetchableRecord, Sendable {
    let id: Int64
    let section: String
    init(row: Row) {
        id = row[0]
        section = row[1]
    }
}
final class NaiveState: @unchecked Sendable {
    var ids: [Int64] = []
    var lastDiffCount = 0
    var error: (any Error)?
}
