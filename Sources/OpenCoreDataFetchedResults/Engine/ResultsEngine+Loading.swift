import Foundation
import OpenCoreDataChanges
import OpenCoreDataContext
import OpenCoreDataModel
import OpenCoreDataPredicate
@_spi(Engine) import OpenCoreDataStore

// Loading the results: one SQL query for keys, sort values and sections, or a fetch of objects.
extension ResultsEngine {
    // MARK: Loading

    /// The rows of the results from one SQL query that reads the sort values and section names and no object; nil
    /// when this cannot be done (pending changes to merge in memory, a section key path that ends at a
    /// relationship): the caller fetches objects.
    func fetchRows(_ request: NSFetchRequest<NSManagedObject>) throws -> LoadedRows? {
        let sectionType = sectionKeyAttributeType
        if sectionKeyPath != nil, sectionType == nil { return nil }
        var keyPaths = sorts.map(\.key)
        // The section key is usually the first sort key: read it once.
        let sectionColumn = sectionKeyPath.map { path in keyPaths.firstIndex(of: path) ?? keyPaths.count }
        if let sectionKeyPath, sectionColumn == keyPaths.count { keyPaths.append(sectionKeyPath) }
        let sortCount = sorts.count
        var loaded = LoadedRows()
        // The previous row's section value and name (`hasPrevious` is false before the first row).
        var (hasPrevious, previousValue, section) = (false, AttributeValue.null, "")
        var lastEntity: (id: Int, number: Int32) = (-1, 0)
        let model = context.persistentStoreCoordinator?.managedObjectModel
        let empty = RowBody.empty
        let handled = try context._fetchResultKeys(request, values: keyPaths) { entityID, primaryKey, values in
            var sameSection = sectionType == nil
            if let sectionType, let sectionColumn {
                // Rows come in section order: most share the previous row's section value (and so its name). The
                // store says when it knows the value repeats, which saves comparing values.
                if hasPrevious, values.isUnchanged(sectionColumn) || previousValue == values[sectionColumn] {
                    sameSection = true
                } else {
                    previousValue = values[sectionColumn]
                    hasPrevious = true
                    if case .string(let text) = previousValue {
                        section = text
                    } else {
                        section = Self.sectionName(for: NSManagedObjectContext._objectValue(previousValue, type: sectionType))
                    }
                }
            }
            // Rows of one entity follow one another (usually all are of one): look the entity up when it changes.
            if entityID != lastEntity.id, let entity = model?.entity(withID: entityID) {
                lastEntity = (entityID, self.number(of: entity))
            }
            loaded.appendStored(
                entity: lastEntity.number, primaryKey: primaryKey, values: values, sortCount: sortCount, empty: empty,
                section: section, sameSection: sameSection)
        }
        return handled ? loaded : nil
    }

    /// The results as rows: from the row query with a batch size, else from a fetch of objects (which the rows keep,
    /// as Core Data keeps the objects of a fetch without a batch size).
    ///
    /// With `strict`, an object whose sort or section
    /// values cannot be read makes the load throw; otherwise it is left out (its row is gone).
    ///
    /// A fetch of objects comes in the store's order, but each row is placed by the values its object holds: a
    /// registered object whose row someone changed without a new version (plain SQL elsewhere, read between this
    /// context's catch-up and the fetch) still holds the values it had. The rows are put in the order of the values
    /// they are placed by, so that the list and its placements agree — otherwise the catch-up that brings the new
    /// values finds the row already where they put it, and reports no move the delegate has not seen.
    func load(_ request: NSFetchRequest<NSManagedObject>, strict: Bool) throws -> LoadedRows {
        if request.fetchBatchSize > 0, let fetched = try fetchRows(request) { return fetched }
        var fetched: [(row: ResultRow, section: String)] = []
        for object in try context.fetch(request) {
            let placement: Placement
            if strict {
                placement = try self.placement(of: object)
            } else {
                guard let readable = try? self.placement(of: object) else { continue }
                placement = readable
            }
            fetched.append((ResultRow(key: key(of: object), values: placement.values, object: object), placement.section))
        }
        let sorts = self.sorts
        let inOrder = zip(fetched, fetched.dropFirst()).allSatisfy { a, b in
            !Self.precedes(b.row.values, b.row.key, a.row.values, a.row.key, sorts)
        }
        if !inOrder { fetched.sort { a, b in Self.precedes(a.row.values, a.row.key, b.row.values, b.row.key, sorts) } }
        var loaded = LoadedRows()
        for (row, section) in fetched { loaded.append(row, section: section) }
        return loaded
    }
}
