import OpenCoreDataModel
import OpenCoreDataPredicate

extension StoreFetchRequest {
    /// `items` sorted by `descriptors` over `values(item)` (one value per descriptor), ties kept in their order: the
    /// comparison the stores' SQL uses, for results ordered in memory (a merge of several stores, a distinct fetch).
    package static func ordered<T>(_ items: [T], by descriptors: [FetchSortDescriptor], _ values: (T) -> [AttributeValue]) -> [T] {
        guard !descriptors.isEmpty else { return items }
        let keyed = items.enumerated().map { (offset: $0.offset, item: $0.element, values: values($0.element)) }
        return keyed.sorted { a, b in
            for (index, descriptor) in descriptors.enumerated() {
                let order = descriptor.compareValues(a.values[index], b.values[index])
                if order != 0 { return descriptor.ascending ? order < 0 : order > 0 }
            }
            return a.offset < b.offset
        }.map(\.item)
    }

    /// The part of `items` the request's offset and limit select.
    package func window<T>(_ items: [T]) -> [T] {
        let start = min(fetchOffset, items.count)
        let end = fetchLimit > 0 ? min(items.count, start + fetchLimit) : items.count
        return Array(items[start..<end])
    }

    /// Dictionaries sorted by the request's sort descriptors (by the values of their keys), made distinct without
    /// the keys in `extra` (read only to sort by), and windowed: a distinct dictionary fetch with sorts, whose SQL
    /// cannot order by columns it does not select.
    package func orderedDistinct(_ rows: [[String: AttributeValue]], droppingKeys extra: [String]) -> [[String: AttributeValue]] {
        var result = Self.ordered(rows, by: sortDescriptors) { row in sortDescriptors.map { row[$0.key] ?? .null } }
        if !extra.isEmpty { result = result.map { $0.filter { !extra.contains($0.key) } } }
        var seen: Set<[String: AttributeValue]> = []
        return window(result.filter { seen.insert($0).inserted })
    }
}
