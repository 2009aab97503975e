import Foundation
import OpenCoreDataModel
import OpenCoreDataPredicate
import OpenCoreDataStore

extension NSManagedObjectContext {
    /// Runs a batch request against the store (a child context's, its root's), a history request, or starts an
    /// asynchronous fetch.
    ///
    /// A batch request's rows are inserted, updated or deleted in SQL in one transaction, without objects; the
    /// context's objects do not change (merge the result with `mergeChanges(fromRemoteContextSave:into:)`). An
    /// `NSAsynchronousFetchRequest` returns its result at once, complete when the fetch's block has run.
    ///
    /// For example:
    /// ```swift
    /// let delete = NSBatchDeleteRequest(objectIDs: ids)
    /// delete.resultType = .resultTypeObjectIDs
    /// let deleted = (try context.execute(delete) as? NSBatchDeleteResult)?.result as? [NSManagedObjectID] ?? []
    /// NSManagedObjectContext.mergeChanges(fromRemoteContextSave: [NSDeletedObjectsKey: deleted], into: [viewContext])
    /// ```
    /// - Throws: `CoreDataError` naming the entity and key of a bad value or key, a malformed predicate, a deny rule
    ///   that forbids a delete, or a store failure; nothing is written then.
    public func execute(_ request: NSPersistentStoreRequest) throws -> NSPersistentStoreResult {
        // An asynchronous fetch runs later, in a block of its own on the context's queue.
        if let fetch = request as? any AsynchronousFetch { return fetch.start(in: self) }
        return try withLock {
            let engines = persistentStoreCoordinator?.storeEngines ?? []
            guard !engines.isEmpty else {
                throw CoreDataError(
                    .persistentStoreOperation,
                    "Batch requests need a store: add one to the context's coordinator (or load the container's stores).")
            }
            switch request {
            case let insert as NSBatchInsertRequest:
                return try executeInsert(insert, try batchCapableStores(engines, for: "a batch insert"))
            case let update as NSBatchUpdateRequest:
                return try executeUpdate(update, try batchCapableStores(engines, for: "a batch update"))
            case let delete as NSBatchDeleteRequest:
                return try executeDelete(delete, try batchCapableStores(engines, for: "a batch delete"))
            case let history as NSPersistentHistoryChangeRequest:
                let stores = engines.compactMap { $0 as? any HistoryStore }
                guard !stores.isEmpty else {
                    throw CoreDataError(
                        .persistentStoreOperation, "None of the coordinator's stores (\(Self.describe(engines))) keeps persistent history.")
                }
                return try executeHistory(history, historyStore(history, stores))
            default:
                throw CoreDataError(
                    .unsupported, "\(type(of: request)) is not a request OpenCoreData runs; use a batch insert, update or delete request.")
            }
        }
    }

    /// The coordinator's stores that run batch requests: every one, or an error naming the first that cannot.
    private func batchCapableStores(_ engines: [any StoreEngine], for what: String) throws -> [any BatchRequestStore] {
        try engines.map { engine in
            guard let store = engine as? any BatchRequestStore else {
                throw CoreDataError(
                    .persistentStoreOperation,
                    "The \(engine.type) store \(engine.identifier) cannot run \(what) (it has no batch requests).")
            }
            return store
        }
    }

    /// The stores a batch update or delete of `entity` reads: those holding it (or, included, one of its subentities).
    private func batchStores(_ entity: NSEntityDescription, includesSubentities: Bool, of stores: [any BatchRequestStore])
        -> [any BatchRequestStore]
    {
        guard let router = persistentStoreCoordinator?.contextStore as? StoreRouter else { return stores }
        var fetch = StoreFetchRequest(entity: entity)
        fetch.includesSubentities = includesSubentities
        return router.fetchTargets(fetch).compactMap { router.stores[$0] as? any BatchRequestStore }
    }

    /// The stores, by type and identifier, for messages.
    private static func describe(_ engines: [any StoreEngine]) -> String {
        engines.map { "\($0.type) \($0.identifier)" }.joined(separator: ", ")
    }

    /// The store a history request reads: its token's, else the first that keeps history.
    private func historyStore(_ request: NSPersistentHistoryChangeRequest, _ stores: [any HistoryStore]) -> any HistoryStore {
        if let token = request.token, let store = stores.first(where: { $0.identifier == token.storeIdentifier }) { return store }
        return stores.first { $0.keepsHistory } ?? stores[0]
    }

    private func executeInsert(_ request: NSBatchInsertRequest, _ stores: [any BatchRequestStore]) throws -> NSBatchInsertResult {
        let entity = try request.entity ?? entity(named: request.entityName)
        // New rows go where a save would put new objects: the first store holding the entity.
        let target = store?.storeIdentifier(for: entity)
        guard let store = stores.first(where: { $0.identifier == target }) else {
            throw CoreDataError(
                .persistentStoreOperation,
                "No store of this coordinator holds \(entity.name) objects: none of its configurations lists the entity.",
                entityName: entity.name)
        }
        let rows = BatchRowConverter(entity)
        var objects = request.objectsToInsert?.makeIterator()
        var finished = false
        var number = 0
        let (count, ids) = try store.batchInsert(entity, collectingIDs: request.resultType == .objectIDs, author: historyAuthor) {
            var chunk: [[SnapshotValue]] = []
            while chunk.count < 4096, !finished {
                number += 1
                if objects != nil {
                    guard let next = objects!.next() else {
                        finished = true
                        break
                    }
                    chunk.append(try rows.row(next, number: number))
                } else if let handler = request.dictionaryHandler {
                    let dictionary = NSMutableDictionary()
                    if handler(dictionary) {
                        finished = true
                        break
                    }
                    var values: [String: Any] = [:]
                    for (key, value) in dictionary { values["\(key)"] = value }
                    chunk.append(try rows.row(values, number: number))
                } else {
                    finished = true
                }
            }
            return chunk.isEmpty ? nil : chunk
        }
        switch request.resultType {
        case .statusOnly: return NSBatchInsertResult(.statusOnly, true)
        case .objectIDs: return NSBatchInsertResult(.objectIDs, ids)
        case .count: return NSBatchInsertResult(.count, count)
        }
    }

    private func executeUpdate(_ request: NSBatchUpdateRequest, _ stores: [any BatchRequestStore]) throws -> NSBatchUpdateResult {
        let entity = try request.entity ?? entity(named: request.entityName)
        var values: [(index: Int, value: AttributeValue)] = []
        for (key, value) in request.propertiesToUpdate ?? [:] {
            let name = "\(key)"
            guard let index = entity.propertyIndex(named: name), let attribute = entity.allProperties[index] as? NSAttributeDescription,
                !attribute.isTransient
            else {
                throw CoreDataError(
                    .unknownKey, "The batch update of \(entity.name) sets '\(name)', which is not a stored attribute of \(entity.name).",
                    entityName: entity.name, key: name)
            }
            values.append((index, try BatchRowConverter.storedValue(value, attribute, entity)))
        }
        var fetch = StoreFetchRequest(entity: entity, resultKind: .objectIDs)
        fetch.predicate = request.predicate
        fetch.includesSubentities = request.includesSubentities
        let wantsIDs = request.resultType == .updatedObjectIDsResultType
        var (count, ids) = (0, [NSManagedObjectID]())
        for store in batchStores(entity, includesSubentities: request.includesSubentities, of: stores) {
            let (n, found) = try store.batchUpdate(
                fetch, values: values.sorted { $0.index < $1.index }, collectingIDs: wantsIDs, author: historyAuthor)
            count += n
            ids += found
        }
        switch request.resultType {
        case .statusOnlyResultType: return NSBatchUpdateResult(.statusOnlyResultType, true)
        case .updatedObjectIDsResultType: return NSBatchUpdateResult(.updatedObjectIDsResultType, ids)
        case .updatedObjectsCountResultType: return NSBatchUpdateResult(.updatedObjectsCountResultType, count)
        }
    }

    private func executeDelete(_ request: NSBatchDeleteRequest, _ stores: [any BatchRequestStore]) throws -> NSBatchDeleteResult {
        var deleted: [NSManagedObjectID] = []
        if let ids = request.objectIDs {
            if let foreign = ids.first(where: { id in !id.isTemporaryID && !stores.contains { $0.identifier == id.storeIdentifier } }) {
                throw CoreDataError(
                    .objectNotFound, "The batch delete names \(foreign), an object of another store.", entityName: foreign.entity.name)
            }
            // Per store, its own objects (a temporary ID names no row anywhere).
            for store in stores {
                let own = ids.filter { $0.storeIdentifier == store.identifier }
                if !own.isEmpty { deleted += try store.batchDelete(.objectIDs(own), author: historyAuthor) }
            }
        } else {
            let entity = try request.fetchEntity ?? entity(named: request.fetchEntityName ?? "")
            var fetch = StoreFetchRequest(entity: entity, resultKind: .objectIDs)
            fetch.predicate = request.fetchPredicate
            fetch.includesSubentities = request.fetchIncludesSubentities
            for store in batchStores(entity, includesSubentities: request.fetchIncludesSubentities, of: stores) {
                deleted += try store.batchDelete(.matching(fetch), author: historyAuthor)
            }
        }
        switch request.resultType {
        case .resultTypeStatusOnly: return NSBatchDeleteResult(.resultTypeStatusOnly, true)
        case .resultTypeObjectIDs: return NSBatchDeleteResult(.resultTypeObjectIDs, deleted)
        case .resultTypeCount: return NSBatchDeleteResult(.resultTypeCount, deleted.count)
        }
    }

    /// Merges changes another writer made to the store (a batch request's result, another process's save) into
    /// contexts, as if one of them had saved: objects they hold take the stored values, deleted ones go, and their
    /// fetched results controllers report inserts, updates, moves and deletes (Core Data's
    /// `mergeChanges(fromRemoteContextSave:into:)`).
    ///
    /// For example:
    /// ```swift
    /// NSManagedObjectContext.mergeChanges(fromRemoteContextSave: [NSUpdatedObjectsKey: updatedIDs], into: [viewContext])
    /// ```
    /// `changeNotificationData` holds arrays or sets of `NSManagedObjectID`s (or their URIs) under
    /// `NSInsertedObjectsKey`, `NSUpdatedObjectsKey` and `NSDeletedObjectsKey` (or the `…ObjectIDsKey` forms). Each
    /// context merges on its own queue, before this returns.
    public static func mergeChanges(
        fromRemoteContextSave changeNotificationData: [AnyHashable: Any], into contexts: [NSManagedObjectContext]
    ) {
        func ids(_ keys: [String], in context: NSManagedObjectContext) -> [NSManagedObjectID] {
            var result: [NSManagedObjectID] = []
            for key in keys {
                let value = changeNotificationData[key]
                let items: [Any] =
                    (value as? [Any]) ?? (value as? Set<NSManagedObjectID>).map(Array.init) ?? (value as? Set<URL>).map(Array.init) ?? []
                for item in items {
                    if let id = item as? NSManagedObjectID {
                        result.append(id)
                    } else if let url = item as? URL,
                        let id = context.persistentStoreCoordinator?.managedObjectID(forURIRepresentation: url)
                    {
                        result.append(id)
                    }
                }
            }
            return result
        }
        for context in contexts {
            context.performAndWait {
                context.mergeObjectIDs(
                    inserted: ids([NSInsertedObjectsKey, NSInsertedObjectIDsKey], in: context),
                    updated: ids([NSUpdatedObjectsKey, NSUpdatedObjectIDsKey], in: context),
                    deleted: ids([NSDeletedObjectsKey, NSDeletedObjectIDsKey], in: context))
            }
        }
    }
}

/// Turns a batch insert's dictionaries into rows of an entity: attribute values checked and converted, defaults for
/// the attributes a dictionary leaves out.
struct BatchRowConverter {
    let entity: NSEntityDescription
    let template: [SnapshotValue]
    let attributes: [String: (index: Int, attribute: NSAttributeDescription)]
    let required: [(index: Int, name: String)]

    init(_ entity: NSEntityDescription) {
        self.entity = entity
        var template: [SnapshotValue] = []
        var attributes: [String: (Int, NSAttributeDescription)] = [:]
        var required: [(Int, String)] = []
        for (index, property) in entity.allProperties.enumerated() {
            if let attribute = property as? NSAttributeDescription {
                template.append(.attribute(property.isTransient ? .null : attribute.defaultValue))
                if !property.isTransient {
                    attributes[property.name] = (index, attribute)
                    if !attribute.isOptional, attribute.defaultValue == .null { required.append((index, property.name)) }
                }
            } else if let relationship = property as? NSRelationshipDescription {
                template.append(relationship.isToMany ? .toMany : .toOne(nil))
            } else {
                template.append(.attribute(.null))
            }
        }
        self.template = template
        self.attributes = attributes
        self.required = required
    }

    /// The row for one dictionary (the `number`th, for messages).
    func row(_ values: [String: Any], number: Int) throws -> [SnapshotValue] {
        var row = template
        for (key, value) in values {
            guard let (index, attribute) = attributes[key] else {
                throw CoreDataError(
                    .unknownKey,
                    "Row \(number) of the batch insert into \(entity.name) sets '\(key)', which is not a stored attribute of \(entity.name) (batch inserts set attributes only).",
                    entityName: entity.name, key: key)
            }
            row[index] = .attribute(try Self.storedValue(value, attribute, entity))
        }
        for (index, name) in required {
            if case .attribute(let value) = row[index], value.isNull {
                throw CoreDataError(
                    .validationMissingMandatoryProperty,
                    "Row \(number) of the batch insert into \(entity.name) has no value for '\(name)', which is required and has no default.",
                    entityName: entity.name, key: name)
            }
        }
        return row
    }

    /// A value as the store keeps it for `attribute`: converted and checked, a transformable one transformed.
    static func storedValue(_ value: Any, _ attribute: NSAttributeDescription, _ entity: NSEntityDescription) throws -> AttributeValue {
        let converted = try ValueConversion.fromAny(value, type: attribute.attributeType, attribute: attribute, entityName: entity.name)
        if attribute.attributeType.isArchived, case .object(let held) = converted {
            return .data(try attribute.storeData(for: held.value, entityName: entity.name))
        }
        return converted
    }
}
