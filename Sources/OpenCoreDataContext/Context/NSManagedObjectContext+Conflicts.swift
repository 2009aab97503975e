import Foundation
import OpenCoreDataModel
import OpenCoreDataStore

/// How a save treats objects that another context or process changed since they were read (Core Data's merge
/// policies), and new objects that collide with stored ones under a uniqueness constraint.
///
/// For example:
/// ```swift
/// context.mergePolicy = .mergeByPropertyObjectTrump
/// ```
/// A conflict found at save is resolved by the policy and the save retried; under `.error` the save fails with
/// `.managedObjectMerge` (or `.constraintConflict`), its `userInfo["conflictList"]` listing an `NSMergeConflict` (or
/// `NSConstraintConflict`) per object.
public enum NSMergePolicy: Sendable {
    /// Fail the save, listing the conflicts (Core Data's default, `NSErrorMergePolicy`).
    case error
    /// This context's changed properties win; the others take the store's values (`NSMergeByPropertyObjectTrumpMergePolicy`).
    case mergeByPropertyObjectTrump
    /// The store's values win for properties changed there too; this context's other changes are written
    /// (`NSMergeByPropertyStoreTrumpMergePolicy`).
    case mergeByPropertyStoreTrump
    /// This context's objects are written whole, over whatever the store holds (`NSOverwriteMergePolicy`).
    case overwrite
    /// This context's changes to objects in conflict are discarded; the store's state wins (`NSRollbackMergePolicy`).
    case rollback
}

/// Core Data's name for `NSMergePolicy.error`: a conflicting save fails.
public let NSErrorMergePolicy = NSMergePolicy.error
/// Core Data's name for `NSMergePolicy.mergeByPropertyObjectTrump`: this context's changed properties win.
public let NSMergeByPropertyObjectTrumpMergePolicy = NSMergePolicy.mergeByPropertyObjectTrump
/// Core Data's name for `NSMergePolicy.mergeByPropertyStoreTrump`: the store's changed properties win.
public let NSMergeByPropertyStoreTrumpMergePolicy = NSMergePolicy.mergeByPropertyStoreTrump
/// Core Data's name for `NSMergePolicy.overwrite`: this context's objects overwrite the store's.
public let NSOverwriteMergePolicy = NSMergePolicy.overwrite
/// Core Data's name for `NSMergePolicy.rollback`: the store's state wins for objects in conflict.
public let NSRollbackMergePolicy = NSMergePolicy.rollback

/// An object whose row another context or process changed (or deleted) since this context read it, found at save
/// (Core Data's `NSMergeConflict`, listed under `userInfo["conflictList"]` of a failed save's error).
///
/// For example:
/// ```swift
/// catch let error as CoreDataError where error.code == .managedObjectMerge {
///     for case let conflict as NSMergeConflict in error.userInfo["conflictList"] as? [Any] ?? [] {
///         print(conflict.sourceObject.objectID, conflict.persistedSnapshot ?? [:])
///     }
/// }
/// ```
public final class NSMergeConflict: @unchecked Sendable {
    /// The object in conflict.
    public let sourceObject: NSManagedObject
    /// The object's values in the context, as it was about to be saved.
    public let objectSnapshot: [String: Any]?
    /// The values the context last read from the store.
    public let cachedSnapshot: [String: Any]?
    /// The values the store holds now; nil when the row was deleted.
    public let persistedSnapshot: [String: Any]?
    /// The row's version in the store now (0 when deleted).
    public let newVersionNumber: Int
    /// The version the context read.
    public let oldVersionNumber: Int

    init(
        source: NSManagedObject, objectSnapshot: [String: Any]?, cachedSnapshot: [String: Any]?, persistedSnapshot: [String: Any]?,
        newVersion: Int, oldVersion: Int
    ) {
        sourceObject = source
        self.objectSnapshot = objectSnapshot
        self.cachedSnapshot = cachedSnapshot
        self.persistedSnapshot = persistedSnapshot
        newVersionNumber = newVersion
        oldVersionNumber = oldVersion
    }
}

/// A new object whose values for a uniqueness constraint are a stored object's (Core Data's `NSConstraintConflict`,
/// listed under `userInfo["conflictList"]` of a failed save's error).
///
/// For example:
/// ```swift
/// for case let conflict as NSConstraintConflict in error.userInfo["conflictList"] as? [Any] ?? [] {
///     print(conflict.constraint, conflict.databaseObject?.objectID as Any)
/// }
/// ```
public final class NSConstraintConflict: @unchecked Sendable {
    /// The constrained properties' names.
    public let constraint: [String]
    /// The values they share.
    public let constraintValues: [String: Any]
    /// The stored object that has them already.
    public let databaseObject: NSManagedObject?
    /// The stored object's values.
    public let databaseSnapshot: [String: Any]?
    /// The objects of the save that collide with it.
    public let conflictingObjects: [NSManagedObject]
    /// Their values.
    public let conflictingSnapshots: [[String: Any]]

    init(
        constraint: [String], constraintValues: [String: Any], databaseObject: NSManagedObject?, databaseSnapshot: [String: Any]?,
        conflictingObjects: [NSManagedObject], conflictingSnapshots: [[String: Any]]
    ) {
        self.constraint = constraint
        self.constraintValues = constraintValues
        self.databaseObject = databaseObject
        self.databaseSnapshot = databaseSnapshot
        self.conflictingObjects = conflictingObjects
        self.conflictingSnapshots = conflictingSnapshots
    }
}

/// The `userInfo` key of a failed save's conflicts (Core Data's `NSPersistentStoreSaveConflictsErrorKey`).
public let NSPersistentStoreSaveConflictsErrorKey = "conflictList"

extension NSManagedObjectContext {
    /// Resolves the conflicts behind a failed save by the merge policy, so that the save can run again; throws the
    /// error with its conflicts listed under `conflictList` when the policy is `.error`, or on the last round.
    func resolveConflicts(
        _ error: CoreDataError, updated: [NSManagedObject], deleted: [NSManagedObject], store: any StoreEngine, lastRound: Bool
    ) throws {
        if error.code == .constraintConflict { return try resolveConstraintConflict(error, lastRound: lastRound) }
        let candidates = updated + deleted
        let persisted = try store.rows(for: candidates.map(\.objectID))
        let conflicting = candidates.filter { persisted[$0.objectID]?.version != ($0.snapshot?.version ?? 0) }
        guard mergePolicy != .error, !lastRound, !conflicting.isEmpty else {
            var listed = error
            listed.userInfo[NSPersistentStoreSaveConflictsErrorKey] = conflicting.map { mergeConflict($0, persisted[$0.objectID]) }
            throw listed
        }
        var change = ContextChange(origin: .merge)
        for object in conflicting { resolve(object, persisted: persisted[object.objectID], into: &change) }
        deliver(change)
    }

    private func mergeConflict(_ object: NSManagedObject, _ persisted: RowSnapshot?) -> NSMergeConflict {
        return NSMergeConflict(
            source: object, objectSnapshot: (try? object.currentRowValues()).map { dictionary($0, of: object.entity) },
            cachedSnapshot: object.snapshot.map { dictionary($0.values, of: object.entity) },
            persistedSnapshot: persisted.map { dictionary($0.values, of: object.entity) }, newVersion: Int(persisted?.version ?? 0),
            oldVersion: Int(object.snapshot?.version ?? 0))
    }

    /// A row's values by key, as Core Data's conflict snapshots give them (to-ones as object IDs or `NSNull`).
    func dictionary(_ values: [SnapshotValue], of entity: NSEntityDescription) -> [String: Any] {
        var result: [String: Any] = [:]
        for (property, value) in zip(entity.allProperties, values) where !property.isTransient {
            switch value {
            case .attribute(let attribute):
                if let description = property as? NSAttributeDescription {
                    result[property.name] =
                        (try? ValueConversion.toAny(attribute, attribute: description, entityName: entity.name)) ?? NSNull()
                }
            case .toOne(let id): result[property.name] = id ?? NSNull()
            case .toMany: continue
            }
        }
        return result
    }

    /// One object in conflict, resolved by the merge policy: its committed values become the store's, its pending
    /// changes are kept, dropped or completed as the policy says; an object whose row is gone leaves the context.
    private func resolve(_ object: NSManagedObject, persisted: RowSnapshot?, into change: inout ContextChange) {
        guard let persisted else {
            let wasVisible = object.state == .stored
            forgetDeletedElsewhere(object)
            if wasVisible { change.deleted.append(object) }
            return
        }
        let cached = object.snapshot
        let properties = object.entity.allProperties
        var keys = PropertyMask()
        switch mergePolicy {
        case .mergeByPropertyStoreTrump:
            // Properties the store changed too take the store's value.
            for index in Array(object.changes.keys) where cached.map({ $0.values[index] != persisted.values[index] }) ?? true {
                guard !(properties[index] is NSRelationshipDescription && (properties[index] as! NSRelationshipDescription).isToMany) else {
                    continue
                }
                object.changes.removeValue(forKey: index)
                keys.insert(index)
            }
        case .overwrite:
            // The object is written whole: what the store changed goes back to the object's values.
            if let cached {
                for index in properties.indices where object.changes[index] == nil && cached.values[index] != persisted.values[index] {
                    switch cached.values[index] {
                    case .attribute(let value): if !properties[index].isTransient { object.changes[index] = .attribute(value) }
                    case .toOne(let id): object.changes[index] = .toOne(id.map { self.object(with: $0) })
                    case .toMany: continue
                    }
                }
            }
        case .rollback:
            keys.formUnion(PropertyMask(object.changes.lazy.map(\.key)))
            object.changes = [:]
            object.pendingOrder = [:]
            if object.state == .deleted {
                object.state = .stored
                deletedSet.remove(object)
                eventDeleted.remove(object)
            }
        case .mergeByPropertyObjectTrump, .error: break
        }
        keys.formUnion(refreshSnapshot(of: object, with: persisted, originals: &change._originalAttributeValues))
        noteChangesUpdated(object)
        if !keys.isEmpty, object.state == .stored { change.updates.append((object, keys)) }
    }

    /// A new object that collides with a stored one under a uniqueness constraint: under `.error` (or when it cannot
    /// be resolved) the error is thrown with an `NSConstraintConflict`; otherwise the stored object takes the new
    /// one's place — its relationships, and, under the object-trump and overwrite policies, its attribute values — and
    /// the new object goes.
    private func resolveConstraintConflict(_ error: CoreDataError, lastRound: Bool) throws {
        guard error.conflictingObjectIDs.count == 2, let newObject = registry[error.conflictingObjectIDs[0]],
            newObject.state == .inserted
        else { throw error }
        let stored = object(with: error.conflictingObjectIDs[1])
        try stored.fulfillFault()
        let constraint = (error.key ?? "").components(separatedBy: ", ")
        var values: [String: Any] = [:]
        for name in constraint { values[name] = newObject.value(forKey: name) ?? NSNull() }
        guard mergePolicy != .error, !lastRound else {
            var listed = error
            listed.userInfo[NSPersistentStoreSaveConflictsErrorKey] = [
                NSConstraintConflict(
                    constraint: constraint, constraintValues: values, databaseObject: stored,
                    databaseSnapshot: stored.snapshot.map { dictionary($0.values, of: stored.entity) }, conflictingObjects: [newObject],
                    conflictingSnapshots: [
                        dictionary(try newObject.currentRowValues(), of: newObject.entity)
                    ])
            ]
            throw listed
        }
        try absorb(newObject, into: stored)
    }

    /// Makes `stored` take `newObject`'s place — its relationships, and, under the object-trump and overwrite
    /// policies, the attribute values it was given — and deletes `newObject`.
    private func absorb(_ newObject: NSManagedObject, into stored: NSManagedObject) throws {
        let takesValues = mergePolicy == .mergeByPropertyObjectTrump || mergePolicy == .overwrite
        for (index, property) in newObject.entity.allProperties.enumerated() where !property.isTransient {
            guard let target = stored.entity.propertyIndex(named: property.name) else { continue }
            switch try newObject.currentValue(at: index) {
            case .attribute(let value):
                if takesValues, newObject.changes[index] != nil { try stored.setAttribute(value, at: target) }
            case .toOne(let destination):
                let empty = try stored.currentValue(at: target).isEmptyToOne
                if let destination, takesValues || empty {
                    try stored.setPropertyValue(.toOne(destination), at: target)
                }
            case .toMany(let members):
                guard !members.isEmpty, case .toMany(let existing) = try stored.currentValue(at: target) else { continue }
                try stored.setPropertyValue(.toMany(existing.union(members)), at: target)
            }
        }
        delete(newObject)
        processPendingChanges()
    }

    /// Merges new objects that give a uniqueness constraint the same values (none of them nil).
    ///
    /// The first inserted takes the later ones' places, as a stored object takes a new one's (Core Data resolves such
    /// conflicts among the objects of a save by the merge policy too). Constraints of an entity's superentities count,
    /// as their rows share a table. Returns whether any merged.
    func mergeDuplicateInserts(_ inserted: [NSManagedObject]) throws -> Bool {
        var firsts: [[AnyHashable]: NSManagedObject] = [:]
        var duplicates: [(NSManagedObject, NSManagedObject)] = []
        for object in inserted where object.state == .inserted {
            var entity: NSEntityDescription? = object.entity
            while let declaring = entity {
                for (number, constraint) in declaring.uniquenessConstraints.enumerated() {
                    var key: [AnyHashable] = [ObjectIdentifier(declaring), number]
                    for name in constraint {
                        guard let index = object.entity.propertyIndex(named: name) else { break }
                        switch try object.currentValue(at: index) {
                        case .attribute(let value) where !value.isNull: key.append(value)
                        case .toOne(let destination?): key.append(ObjectIdentifier(destination))
                        default: break
                        }
                    }
                    guard key.count == constraint.count + 2 else { continue }  // a nil value never collides
                    if let first = firsts[key] {
                        duplicates.append((object, first))
                    } else {
                        firsts[key] = object
                    }
                }
                entity = declaring.superentity
            }
        }
        for (newObject, first) in duplicates where newObject.state == .inserted && first.state == .inserted {
            try absorb(newObject, into: first)
        }
        return !duplicates.isEmpty
    }
}

extension PropertyValue {
    /// Whether this is a to-one with no destination.
    var isEmptyToOne: Bool {
        if case .toOne(nil) = self { return true }
        return false
    }
}
