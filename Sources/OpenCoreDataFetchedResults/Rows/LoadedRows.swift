@_spi(Engine) import OpenCoreDataStore

/// Rows as a load produces them, in result order, with their sections counted as they come (no second pass).
///
/// A load appends up to millions of rows, so the row being filled and the section being counted are kept apart from
/// the finished ones: appending costs one array append and one addition.
struct LoadedRows {
    /// The rows, in order.
    var rows: ChunkedArray<ResultRow> {
        get {
            guard !tail.isEmpty else { return full }
            var all = full
            // The last chunk without the room it kept for appends: at 10,000 rows that room held 240 rows (11 KB, more
            // than a byte a row of what the controller holds); copying the chunk's rows costs a few microseconds.
            var last: [ResultRow] = []
            last.reserveCapacity(tail.count)
            last.append(contentsOf: tail)
            all.appendChunk(last)
            return all
        }
        set { (full, tail) = (newValue, []) }
    }
    /// How many rows there are (without assembling `rows`).
    var rowCount: Int { full.count + tail.count }
    /// The finished chunks of rows, then the chunk being filled.
    private var full = ChunkedArray<ResultRow>()
    private var tail: [ResultRow] = []
    private(set) var sectionNames: [String] = []
    /// The number of rows of each section (aligned with `sectionNames`).
    var sectionCounts: [Int] { lastCount > 0 ? finishedCounts + [lastCount] : finishedCounts }
    /// The counts of every section but the last, and the last one's.
    private var finishedCounts: [Int] = []
    private var lastCount = 0
    private var seen: Set<String> = []
    /// The first row whose section already appeared before another one (the sort does not order the sections).
    private(set) var firstRepeat: (row: Int, section: String)?
    /// The unsaved objects among the rows (only a fetch of objects has any).
    private(set) var unsaved: Set<ObjectIdentifier> = []

    /// Adds a row of `section`.
    ///
    /// `sameSection` says the caller knows it is in the previous row's section (no name comparison).
    mutating func append(_ row: consuming ResultRow, section: String, sameSection: Bool = false) {
        count(section: section, sameSection: sameSection)
        if case .unsaved(let object) = row.key { unsaved.insert(ObjectIdentifier(object)) }
        makeRoom()
        tail.append(consume row)
    }

    /// Adds a stored row without an object (a batched fetch's), built in place.
    @inline(__always)
    mutating func appendStored(
        entity: Int32, primaryKey: Int64, values: ResultKeyValues, sortCount: Int, empty: AnyObject, section: @autoclosure () -> String,
        sameSection: Bool
    ) {
        count(section: section(), sameSection: sameSection)
        makeRoom()
        guard let packed = ResultRow.pack(entity: entity, primaryKey: primaryKey) else {
            appendWide(entity: entity, primaryKey: primaryKey, values: SortValues(values, count: sortCount))
            return
        }
        tail.append(ResultRow(packedKey: packed, body: RowBody(values, count: sortCount, slot: empty)))
    }

    /// Appends a stored row whose key does not pack (kept out of the loop above: it never runs in practice).
    @inline(never)
    private mutating func appendWide(entity: Int32, primaryKey: Int64, values: SortValues) {
        tail.append(ResultRow(key: .stored(entity: entity, primaryKey: primaryKey), values: values))
    }

    /// Moves a full tail into the chunks, giving the next one its capacity up front.
    @inline(__always)
    private mutating func makeRoom() {
        guard tail.count == tail.capacity else { return }
        if !tail.isEmpty { full.appendChunk(tail) }
        tail = []
        tail.reserveCapacity(ChunkedArray<ResultRow>.loadedChunk)
    }

    /// Counts a row of `section`; `sameSection` says it is the previous row's (no name comparison).
    @inline(__always)
    private mutating func count(section name: @autoclosure () -> String, sameSection: Bool) {
        if lastCount > 0, sameSection {
            lastCount += 1
            return
        }
        // (Read only here: a row of the previous row's section, the usual case, copies no name.)
        let section = name()
        if lastCount > 0, sectionNames.last == section {
            lastCount += 1
            return
        }
        if !seen.insert(section).inserted, firstRepeat == nil { firstRepeat = (rowCount, section) }
        if lastCount > 0 { finishedCounts.append(lastCount) }
        sectionNames.append(section)
        lastCount = 1
    }
}
