import Foundation
import OpenCoreDataChanges
import OpenCoreDataContext
import OpenCoreDataModel
import OpenCoreDataPredicate

// The section cache: loaded at a fetch when valid, written after saves and merges.
extension ResultsEngine {
    // MARK: Section cache

    /// What the results depend on now, or nil when there is no store to key them to (a child context's results
    /// depend on its parent's unsaved changes too: they are not cached).
    func cacheKey() -> CachedResults.Key? {
        // Results read from several stores are not cached (the file keys rows by entity and primary key only).
        guard context.parent == nil, let coordinator = context.persistentStoreCoordinator,
            let store = coordinator.persistentStores.first(where: { $0.identifier == storeIdentifier }),
            !context._readsSeveralStores(entity: entity, includesSubentities: includesSubentities), let token = try? store.changeToken
        else { return nil }
        return CachedResults.Key(
            storeIdentifier: store.identifier, changeToken: token, modelVersionHash: coordinator.managedObjectModel.versionHashString,
            entity: entity.name, predicate: predicate?.canonicalFormat ?? "", sorts: sorts.map(\.description),
            sectionKeyPath: sectionKeyPath, includesSubentities: includesSubentities, fetchLimit: fetchLimit, fetchOffset: fetchOffset)
    }

    /// The cached results as rows, when the cache is valid for the request and the store as they are now (and the
    /// context has no unsaved changes); nil otherwise, with no error: the caller recomputes.
    func loadCache(named name: String, request: NSFetchRequest<NSManagedObject>) -> LoadedRows? {
        guard !context.hasChanges, let key = cacheKey(), let model = context.persistentStoreCoordinator?.managedObjectModel,
            let data = SectionCache.contents(named: name)
        else { return nil }
        var list = LoadedRows()
        var sectionNames: [String] = []
        var entityNumbers: [Int32?] = []  // by the file's entity index, looked up on first use
        let header = CacheFileFormat.decode(data) { header in
            // The rows are read only when the key matches and the store still holds as many results.
            guard header.key == key, let count = try? context.count(for: request), count == header.count else { return false }
            sectionNames = header.sectionNames
            entityNumbers = header.entities.map { model.entity(named: $0).map(number(of:)) }
            return true
        } row: { entity, primaryKey, section, values in
            guard let number = entityNumbers[entity], section >= 0, section < sectionNames.count, values.count == sorts.count else {
                return false
            }
            list.append(
                ResultRow(key: .stored(entity: number, primaryKey: primaryKey), values: SortValues(values, count: values.count)),
                section: sectionNames[section])
            return true
        }
        guard header != nil, list.rowCount == header?.count else { return nil }
        return list
    }

    /// Marks the cache stale and, unless a write is already scheduled, writes it after `cacheWriteDelay` on the
    /// context's queue (the results are read there); the encoding and the file write happen off that queue.
    func scheduleCacheWrite() {
        guard !cacheIsDirty else { return }
        cacheIsDirty = true
        let engine = WeakEngine(self)
        let context = self.context
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + Self.cacheWriteDelay) {
            context.performHousekeeping { engine.engine?.flushCache() }
        }
    }

    /// Writes the cache now if saves or merges changed the results since it was last written.
    func flushCache() {
        guard cacheIsDirty else { return }
        cacheIsDirty = false
        saveCache()
    }

    /// Writes the results to the cache when they are what the store holds (no unsaved changes in the context).
    ///
    /// The rows are gathered here; encoding and writing happen on the cache's writer queue.
    func saveCache() {
        guard let cacheName, !context.hasChanges, let key = cacheKey() else { return }
        var cachedRows: [CachedResults.Row] = []
        cachedRows.reserveCapacity(rows.count)
        var iterator = rows.makeIterator()
        for (section, count) in sections.counts.enumerated() {
            for _ in 0..<count {
                guard let row = iterator.next(), case .stored(let entity, let primaryKey) = row.key else { return }
                cachedRows.append(
                    CachedResults.Row(
                        entity: entityTable[Int(entity)].name, primaryKey: primaryKey, values: row.values.array, section: section))
            }
        }
        let engine = WeakEngine(self)
        let context = self.context
        SectionCache.save(CachedResults(key: key, count: rows.count, sectionNames: sections.names, rows: cachedRows), named: cacheName) {
            error in
            // Only the next fetch is slower without the cache; still, say so.
            context.performHousekeeping { engine.engine?.onFailure?(error, "write the section cache '\(cacheName)'") }
        }
    }
}
