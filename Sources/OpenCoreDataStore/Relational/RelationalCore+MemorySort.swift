import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate

// Fetches whose sort the engine cannot order exactly as `FetchSortDescriptor` does (a localized comparison on
// PostgreSQL): the matches are read unordered with their sort values, ordered here by the very comparison the
// in-memory evaluator and SQLite's collations use, and windowed here. Their cost grows with the matches, not the window.
extension RelationalCore {
    /// Whether `request`'s order needs sorting in memory on this dialect.
    func sortsInMemory(_ request: StoreFetchRequest) -> Bool {
        request.sortDescriptors.contains { !dialect.ordersExactly($0.comparison) }
    }

    /// The request without sort and window: every match, in no particular order.
    private func unordered(_ request: StoreFetchRequest) -> StoreFetchRequest {
        var copy = request
        copy.sortDescriptors = []
        copy.fetchLimit = 0
        copy.fetchOffset = 0
        return copy
    }

    /// The matches' keys and values of `keyPaths` (the sort's keys first), ordered by the request's sort (ties by
    /// primary key) and windowed.
    private func orderedEntries(_ request: StoreFetchRequest, values keyPaths: [String], on connection: some RelationalConnection)
        throws -> [(entityID: Int, primaryKey: Int64, values: [AttributeValue])]
    {
        let sorts = request.sortDescriptors
        var entries: [(entityID: Int, primaryKey: Int64, values: [AttributeValue])] = []
        try forEachResultKey(unordered(request), values: sorts.map(\.key) + keyPaths, on: connection) { entityID, pk, values in
            entries.append((entityID, pk, (0..<values.count).map { values[$0] }))
        }
        entries.sort { a, b in
            for (i, sort) in sorts.enumerated() {
                let c = sort.compareValues(a.values[i], b.values[i])
                if c != 0 { return sort.ascending ? c < 0 : c > 0 }
            }
            return a.primaryKey < b.primaryKey
        }
        let start = min(max(request.fetchOffset, 0), entries.count)
        let end = request.fetchLimit > 0 ? min(start + request.fetchLimit, entries.count) : entries.count
        return entries[start..<end].map { ($0.entityID, $0.primaryKey, Array($0.values.dropFirst(sorts.count))) }
    }

    /// `execute` for a request sorted in memory; nil when the engine orders it itself.
    func executeSortingInMemory(_ request: StoreFetchRequest, on connection: some RelationalConnection) throws -> StoreFetchResult? {
        guard sortsInMemory(request) else { return nil }
        switch request.resultKind {
        case .count:
            return nil
        case .objectIDs, .rows:
            let ids = try orderedEntries(request, values: [], on: connection).map { try objectID(pk: $0.primaryKey, entityID: $0.entityID) }
            guard case .rows = request.resultKind else { return .objectIDs(ids) }
            let rows = try self.rows(for: ids, on: connection)
            return .rows(ids.compactMap { rows[$0] })
        case .grouped:
            return nil  // (Grouped results sort in SQL, by fetched and grouped values.)
        case .dictionaries(let keyPaths):
            // The sort's keys must be among the values fetched; otherwise the engine's order stands (binary for
            // strings), as documented.
            guard request.sortDescriptors.allSatisfy({ keyPaths.contains($0.key) }) else { return nil }
            guard case .dictionaries(var result) = try execute(unordered(request), on: connection) else { return nil }
            let sorts = request.sortDescriptors
            result.sort { a, b in
                for sort in sorts {
                    let c = sort.compareValues(a[sort.key] ?? .null, b[sort.key] ?? .null)
                    if c != 0 { return sort.ascending ? c < 0 : c > 0 }
                }
                return false
            }
            let start = min(max(request.fetchOffset, 0), result.count)
            let end = request.fetchLimit > 0 ? min(start + request.fetchLimit, result.count) : result.count
            return .dictionaries(Array(result[start..<end]))
        }
    }

    /// `forEachResultKey` for a request sorted in memory; false when the engine orders it itself.
    func forEachResultKeySortingInMemory(
        _ request: StoreFetchRequest, values keyPaths: [String], on connection: some RelationalConnection,
        _ body: (_ entityID: Int, _ primaryKey: Int64, _ values: ResultKeyValues) throws -> Void
    ) throws -> Bool {
        guard sortsInMemory(request) else { return false }
        let entries = try orderedEntries(request, values: keyPaths, on: connection)
        let count = keyPaths.count
        let buffer = UnsafeMutablePointer<AttributeValue>.allocate(capacity: max(count, 1))
        buffer.initialize(repeating: .null, count: count)
        defer {
            buffer.deinitialize(count: count)
            buffer.deallocate()
        }
        let every = count >= 64 ? UInt64.max : (UInt64(1) << UInt64(count)) - 1
        for entry in entries {
            for i in 0..<count { buffer[i] = entry.values[i] }
            try body(entry.entityID, entry.primaryKey, ResultKeyValues(base: buffer, count: count, changedBits: every))
        }
        return true
    }
}
