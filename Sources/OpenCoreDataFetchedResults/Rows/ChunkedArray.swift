/// An array kept in chunks of at most `ChunkedArray.maximumChunk` elements, so that inserting or removing at any
/// position moves at most one chunk's elements plus one integer per chunk, instead of every element after it.
///
/// The controller keeps its results in one: at a million rows a plain array moves 8 MB of pointers for every insert,
/// delete or move; here a change costs a few microseconds at any size. Reading by position is a binary search over
/// the chunks (O(log(n / chunk))); iterating walks the chunks directly.
struct ChunkedArray<Element>: RandomAccessCollection {
    static var maximumChunk: Int { 1024 }
    /// How full a chunk is filled when elements are appended at the end: half, so that inserts split rarely.
    static var loadedChunk: Int { maximumChunk / 2 }

    private var chunks: [[Element]] = []
    /// The position of each chunk's first element.
    private var starts: [Int] = []
    private(set) var count = 0

    init() {}

    /// Whether `other` is a copy of this array that neither side has changed since it was made: they still share
    /// their storage (any change through either copies the list of chunks first).
    func isUnchangedCopy(of other: ChunkedArray) -> Bool {
        count == other.count
            && chunks.withUnsafeBufferPointer { mine in
                other.chunks.withUnsafeBufferPointer { theirs in mine.baseAddress == theirs.baseAddress }
            }
    }

    init(_ elements: some Sequence<Element>) {
        for element in elements { append(element) }
    }

    /// Adds an element at the end (filling the last chunk to half, as the initializers do).
    mutating func append(_ element: consuming Element) {
        if let last = chunks.indices.last, chunks[last].count < Self.loadedChunk {
            chunks[last].append(consume element)
            count += 1
        } else {
            var chunk: [Element] = []
            chunk.reserveCapacity(Self.loadedChunk)
            chunk.append(consume element)
            appendChunk(chunk)
        }
    }

    /// Adds a non-empty chunk at the end.
    mutating func appendChunk(_ chunk: [Element]) {
        starts.append(count)
        chunks.append(chunk)
        count += chunk.count
    }

    var startIndex: Int { 0 }
    var endIndex: Int { count }

    /// The chunk holding position `index` (`index < count`), and the position inside it.
    private func locate(_ index: Int) -> (chunk: Int, offset: Int) {
        var low = 0, high = starts.count - 1
        while low < high {
            let mid = (low + high + 1) / 2
            if starts[mid] <= index { low = mid } else { high = mid - 1 }
        }
        return (low, index - starts[low])
    }

    subscript(position: Int) -> Element {
        get {
            precondition(position >= 0 && position < count, "ChunkedArray index \(position) out of range 0..<\(count)")
            let (c, o) = locate(position)
            return chunks[c][o]
        }
        set {
            precondition(position >= 0 && position < count, "ChunkedArray index \(position) out of range 0..<\(count)")
            let (c, o) = locate(position)
            chunks[c][o] = newValue
        }
    }

    mutating func insert(_ element: Element, at index: Int) {
        precondition(index >= 0 && index <= count, "ChunkedArray insertion index \(index) out of range 0...\(count)")
        if chunks.isEmpty {
            appendChunk([element])
            return
        }
        // At the end: the last chunk takes it.
        let (c, o) = index == count ? (chunks.count - 1, chunks[chunks.count - 1].count) : locate(index)
        chunks[c].insert(element, at: o)
        count += 1
        for i in (c + 1)..<starts.count { starts[i] += 1 }
        if chunks[c].count > Self.maximumChunk {
            let half = chunks[c].count / 2
            let tail = Array(chunks[c][half...])
            chunks[c].removeSubrange(half...)
            chunks.insert(tail, at: c + 1)
            starts.insert(starts[c] + half, at: c + 1)
        }
    }

    @discardableResult
    mutating func remove(at index: Int) -> Element {
        precondition(index >= 0 && index < count, "ChunkedArray index \(index) out of range 0..<\(count)")
        let (c, o) = locate(index)
        let element = chunks[c].remove(at: o)
        count -= 1
        for i in (c + 1)..<starts.count { starts[i] -= 1 }
        if chunks[c].isEmpty {
            chunks.remove(at: c)
            starts.remove(at: c)
        }
        return element
    }

    /// The first position whose element satisfies `isAtOrAfter`, for a collection partitioned by it (every element
    /// that does not satisfy it comes first); `count` if none does.
    ///
    /// Searches the chunks, then inside one chunk, so each step reads an element directly instead of locating its
    /// chunk. The predicate is handed a pointer to the element where it is, valid only during the call: an element
    /// passed by value to a closure that is not inlined is copied first (the compiler cannot tell that nothing writes
    /// the buffer during the call), which retains and releases every reference it holds.
    func partitioningIndex(where isAtOrAfter: (UnsafePointer<Element>) -> Bool) -> Int {
        var low = 0, high = chunks.count
        while low < high {
            let mid = (low + high) / 2
            if chunks[mid].withUnsafeBufferPointer({ isAtOrAfter($0.baseAddress! + ($0.count - 1)) }) { high = mid } else { low = mid + 1 }
        }
        guard low < chunks.count else { return count }
        let lo = chunks[low].withUnsafeBufferPointer { chunk in
            let base = chunk.baseAddress!
            var lo = 0, hi = chunk.count - 1  // the last element satisfies the predicate
            while lo < hi {
                let mid = (lo + hi) / 2
                if isAtOrAfter(base + mid) { hi = mid } else { lo = mid + 1 }
            }
            return lo
        }
        return starts[low] + lo
    }

    /// Calls `body` with a pointer to each element in order, where it is (valid only during the call): a walk that
    /// reads a field of every element without copying the elements (a copy retains and releases what they hold).
    func forEachInPlace(_ body: (UnsafePointer<Element>) -> Void) {
        for chunk in chunks {
            chunk.withUnsafeBufferPointer { buffer in
                guard let base = buffer.baseAddress else { return }
                for i in 0..<buffer.count { body(base + i) }
            }
        }
    }

    /// The elements in `range`, copied chunk by chunk.
    func elements(in range: Range<Int>) -> [Element] {
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "ChunkedArray range \(range) out of range 0..<\(count)")
        guard !range.isEmpty else { return [] }
        var result: [Element] = []
        result.reserveCapacity(range.count)
        var (c, o) = locate(range.lowerBound)
        while result.count < range.count {
            let take = Swift.min(chunks[c].count - o, range.count - result.count)
            result.append(contentsOf: chunks[c][o..<(o + take)])
            c += 1
            o = 0
        }
        return result
    }

    /// Empties the array and returns its elements in order, to be taken out one by one: moved, not copied (no
    /// reference an element holds is retained and released again, as a copy and the old array's destruction would
    /// do).
    ///
    /// An iterator rather than a method that calls a closure per element: a closure that changes its caller's
    /// variables has each of those accesses checked for exclusivity at run time.
    mutating func drain() -> Drain {
        var taken: [[Element]] = []
        swap(&taken, &chunks)
        (starts, count) = ([], 0)
        taken.reverse()  // (swaps the chunks' references, not their elements)
        return Drain(chunks: taken)
    }

    /// The elements of a drained array, taken out in order.
    struct Drain {
        /// The chunks not started yet, last first.
        fileprivate var chunks: [[Element]]
        /// The chunk being taken, reversed.
        private var current: [Element] = []

        fileprivate init(chunks: [[Element]]) { self.chunks = chunks }

        /// The next element, moved out.
        mutating func next() -> Element? {
            while current.isEmpty {
                guard var chunk = chunks.popLast() else { return nil }
                // Reversed by popping and appending, which move; `reverse()` swaps by copying.
                current.reserveCapacity(chunk.count)
                while let element = chunk.popLast() { current.append(consume element) }
            }
            return current.popLast()
        }
    }

    func makeIterator() -> Iterator { Iterator(chunks: chunks) }

    struct Iterator: IteratorProtocol {
        fileprivate let chunks: [[Element]]
        private var chunk = 0
        private var offset = 0

        fileprivate init(chunks: [[Element]]) { self.chunks = chunks }

        mutating func next() -> Element? {
            while chunk < chunks.count {
                if offset < chunks[chunk].count {
                    defer { offset += 1 }
                    return chunks[chunk][offset]
                }
                chunk += 1
                offset = 0
            }
            return nil
        }
    }
}
