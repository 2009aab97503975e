/// What to fetch: the model class, which models (a `#Predicate`), in what order, how many: SwiftData's
/// `FetchDescriptor`.
///
/// For example:
/// ```swift
/// var descriptor = FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.startDate, order: .reverse)])
/// descriptor.fetchLimit = 10
/// let latest = try context.fetch(descriptor)
/// ```
public struct FetchDescriptor<T: PersistentModel> {
    /// Which models to fetch; all when nil.
    public var predicate: Predicate<T>?
    /// The order of the results, by the models' persisted properties.
    public var sortBy: [SortDescriptor<T>]
    /// The most models to fetch; no limit when nil.
    public var fetchLimit: Int?
    /// How many of the first results to skip.
    public var fetchOffset: Int?
    /// Whether unsaved changes of the context count (inserted models fetched, changed ones matched by their new values).
    public var includePendingChanges: Bool = true
    /// The properties to load with the models (`[\.title, \.date]`): the fetch reads those attributes only, and a
    /// model reads the rest of its row when one of its other properties is first read or any is changed. (Not for
    /// `fetch(_:batchSize:)` or `enumerate`, whose rows load whole with their batches; a fetch that has to weigh unsaved
    /// changes also reads whole rows.)
    public var propertiesToFetch: [PartialKeyPath<T>] = []
    /// The relationships whose models to load with the results (`[\.project]`): their rows are read with the fetch, a
    /// statement per relationship, rather than one per model when each is first read. (Not for `fetch(_:batchSize:)`,
    /// whose rows load with their batches.)
    public var relationshipKeyPathsForPrefetching: [PartialKeyPath<T>] = []

    /// A descriptor with a predicate and an order.
    public init(predicate: Predicate<T>? = nil, sortBy: [SortDescriptor<T>] = []) {
        self.predicate = predicate
        self.sortBy = sortBy
    }
}
