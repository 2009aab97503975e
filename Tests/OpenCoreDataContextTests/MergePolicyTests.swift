import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Core Data's five merge policies on a save that meets a row another context changed since it was read, and on new
/// objects that collide with stored ones under a uniqueness constraint; `.error` lists the conflicts under Core
/// Data's `conflictList` key.
@Suite struct MergePolicyTests {
    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Item") {
                Attribute("name", .string)
                Attribute("score", .integer32, default: 0)
                Attribute("note", .string)
            }
            Entity("Product", unique: [["code"]]) {
                Attribute("code", .string)
                Attribute("name", .string)
                Relationship("lines", to: "Line", toMany: true, inverse: "product")
            }
            Entity("Line") {
                Attribute("quantity", .integer32, default: 0)
                Relationship("product", to: "Product", inverse: "lines")
            }
        }
    }

    /// A conflict on item "orig" saved under `policy`.
    ///
    /// Item "orig" (score 1, note "orig") is read by `ours`; another context then sets score 2 and note "theirs" and
    /// saves; `ours` sets name "ours" and score 5, with `policy`, and saves. Returns the save's error, the stored values, and
    /// what `ours` shows after.
    func conflict(_ policy: NSMergePolicy) throws -> (error: CoreDataError?, stored: [String: String], shown: [String: String]) {
        let stack = try TestStack(model: try Self.model())
        let setup = stack.context()
        try setup.performAndWait {
            try setup.make("Item", ["name": "orig", "score": 1, "note": "orig"])
            try setup.save()
        }
        let ours = stack.context()
        ours.mergePolicy = policy
        let item = try ours.performAndWait { try #require(try ours.objects("Item").first) }
        let theirs = stack.context()
        try theirs.performAndWait {
            let same = try #require(try theirs.objects("Item").first)
            same.setValue(2, forKey: "score")
            same.setValue("theirs", forKey: "note")
            try theirs.save()
        }
        var error: CoreDataError?
        let shown = ours.performAndWait {
            item.setValue("ours", forKey: "name")
            item.setValue(5, forKey: "score")
            do { try ours.save() } catch let e as CoreDataError { error = e } catch {}
            return Self.values(item)
        }
        let reader = stack.context()
        let stored = try reader.performAndWait { Self.values(try #require(try reader.objects("Item").first)) }
        return (error, stored, shown)
    }

    static func values(_ object: NSManagedObject) -> [String: String] {
        ["name": object.string("name") ?? "-", "score": "\(object.value(forKey: "score") ?? "-")", "note": object.string("note") ?? "-"]
    }

    @Test func errorFailsAndListsTheConflict() throws {
        let (error, stored, _) = try conflict(.error)
        #expect(error?.code == .managedObjectMerge)
        #expect(stored == ["name": "orig", "score": "2", "note": "theirs"], "nothing of the failed save was written")
        let list = error?.userInfo[NSPersistentStoreSaveConflictsErrorKey] as? [NSMergeConflict]
        let conflict = try #require(list?.first)
        #expect(list?.count == 1)
        #expect(conflict.cachedSnapshot?["score"] as? Int32 == 1 && conflict.persistedSnapshot?["score"] as? Int32 == 2)
        #expect(conflict.objectSnapshot?["score"] as? Int32 == 5 && conflict.objectSnapshot?["name"] as? String == "ours")
        #expect(conflict.newVersionNumber > conflict.oldVersionNumber)
        #expect((error?.errorUserInfo["conflictList"] as? [NSMergeConflict])?.count == 1, "bridged under Core Data's key")
    }

    @Test func objectTrumpKeepsOurChangedPropertiesAndTheirOthers() throws {
        let (error, stored, shown) = try conflict(.mergeByPropertyObjectTrump)
        #expect(error == nil)
        #expect(stored == ["name": "ours", "score": "5", "note": "theirs"])
        #expect(shown == stored)
    }

    @Test func storeTrumpKeepsTheirChangedPropertiesAndOurOthers() throws {
        let (error, stored, shown) = try conflict(.mergeByPropertyStoreTrump)
        #expect(error == nil)
        #expect(stored == ["name": "ours", "score": "2", "note": "theirs"])
        #expect(shown == stored)
    }

    @Test func overwriteWritesOurWholeObject() throws {
        let (error, stored, shown) = try conflict(.overwrite)
        #expect(error == nil)
        #expect(stored == ["name": "ours", "score": "5", "note": "orig"])
        #expect(shown == stored)
    }

    @Test func rollbackDiscardsOurChangesToTheObject() throws {
        let (error, stored, shown) = try conflict(.rollback)
        #expect(error == nil)
        #expect(stored == ["name": "orig", "score": "2", "note": "theirs"])
        #expect(shown == stored)
    }

    /// A row deleted elsewhere: under any policy but `.error` the object leaves the context and the rest is saved.
    @Test func anObjectDeletedElsewhereLeavesTheContextAndTheRestIsSaved() throws {
        for policy in [NSMergePolicy.mergeByPropertyObjectTrump, .mergeByPropertyStoreTrump, .overwrite, .rollback] {
            let stack = try TestStack(model: try Self.model())
            let setup = stack.context()
            try setup.performAndWait {
                try setup.make("Item", ["name": "gone"])
                try setup.save()
            }
            let ours = stack.context()
            ours.mergePolicy = policy
            let item = try ours.performAndWait { try #require(try ours.objects("Item").first) }
            let theirs = stack.context()
            try theirs.performAndWait {
                try theirs.objects("Item").forEach(theirs.delete)
                try theirs.save()
            }
            try ours.performAndWait {
                item.setValue(7, forKey: "score")
                try ours.make("Item", ["name": "new"])
                try ours.save()
                #expect(item.managedObjectContext == nil, "\(policy)")
            }
            let reader = stack.context()
            #expect(try reader.performAndWait { try reader.objects("Item").map { $0.string("name") } } == ["new"], "\(policy)")
        }
    }

    @Test func rollbackKeepsAnObjectWhoseDeletionConflicts() throws {
        let stack = try TestStack(model: try Self.model())
        let setup = stack.context()
        try setup.performAndWait {
            try setup.make("Item", ["name": "kept", "score": 1])
            try setup.save()
        }
        let ours = stack.context()
        ours.mergePolicy = .rollback
        let item = try ours.performAndWait { try #require(try ours.objects("Item").first) }
        let theirs = stack.context()
        try theirs.performAndWait {
            try theirs.objects("Item").first?.setCheckedValue(3, forKey: "score")
            try theirs.save()
        }
        try ours.performAndWait {
            ours.delete(item)
            try ours.save()
            #expect(!item.isDeleted && item.value(forKey: "score") as? Int32 == 3)
        }
        let reader = stack.context()
        #expect(try reader.performAndWait { try reader.objects("Item").count } == 1)
    }

    /// A fault whose row another context deleted reads nil and is marked deleted (`shouldDeleteInaccessibleFaults`,
    /// on by default); with it off the object reads nil and is not marked; `checkedValue(forKey:)` throws either way.
    @Test func inaccessibleFaultsAreMarkedDeletedAsTheContextSays() throws {
        let stack = try TestStack(model: try Self.model())
        let setup = stack.context()
        let ids = try setup.performAndWait {
            let items = [try setup.make("Item", ["name": "one"]), try setup.make("Item", ["name": "two"])]
            try setup.save()
            return items.map(\.objectID)
        }
        let ours = stack.context()
        let faults = ours.performAndWait { ids.map { ours.object(with: $0) } }
        let theirs = stack.context()
        try theirs.performAndWait {
            try theirs.objects("Item").forEach(theirs.delete)
            try theirs.save()
        }
        #expect(ours.shouldDeleteInaccessibleFaults && ours.stalenessInterval < 0)
        #expect(ours.performAndWait { faults[0].value(forKey: "name") == nil && faults[0].isDeleted })
        ours.shouldDeleteInaccessibleFaults = false
        #expect(ours.performAndWait { faults[1].value(forKey: "name") == nil && !faults[1].isDeleted })
        let error = #expect(throws: CoreDataError.self) { _ = try ours.performAndWait { try faults[1].checkedValue(forKey: "name") } }
        #expect(error?.code == .objectNotFound)
    }

    /// Three new products "y" in one save, each with a line: under the merge policies they become the first one
    /// (object-trump: the last name given wins; store-trump: the first keeps its own), with all three lines; under
    /// `.error` the save fails naming the constraint and writes nothing.
    @Test func newObjectsSharingAConstraintsValuesBecomeOne() throws {
        for policy in [NSMergePolicy.error, .mergeByPropertyObjectTrump, .mergeByPropertyStoreTrump] {
            let stack = try TestStack(model: try Self.model())
            let ours = stack.context()
            ours.mergePolicy = policy
            let result: Result<Void, any Error> = ours.performAndWait {
                Result {
                    for name in ["first", "second", "third"] {
                        let product = try ours.make("Product", ["code": "y", "name": name])
                        try ours.make("Line", ["quantity": 1, "product": product])
                    }
                    try ours.make("Product", ["code": "z", "name": "other"])
                    try ours.save()
                }
            }
            let reader = stack.context()
            let (products, lines) = try reader.performAndWait {
                (
                    try reader.objects("Product", sort: ["code"]).map { "\($0.string("code") ?? "") \($0.string("name") ?? "-")" },
                    try reader.objects("Line").map { ($0.value(forKey: "product") as? NSManagedObject)?.string("code") }
                )
            }
            switch policy {
            case .error:
                let error = try #require(result.failureError as? CoreDataError, "the save should fail under .error")
                #expect(error.code == .constraintValidation && error.message.contains("code = y"))
                #expect(products.isEmpty && lines.isEmpty)
            default:
                if let failure = result.failureError { Issue.record("\(policy): \(failure)") }
                let name = policy == .mergeByPropertyObjectTrump ? "third" : "first"
                #expect(products == ["y \(name)", "z other"], "\(policy)")
                #expect(lines == ["y", "y", "y"], "\(policy): every line points at the product that stayed")
            }
        }
    }

    /// Stored product "x"; a new product "x" with a line: `.error` lists an `NSConstraintConflict`; object-trump moves
    /// the new product's name and line onto the stored one; store-trump keeps the stored name and takes the line.
    @Test func constraintConflictsResolveIntoTheStoredObject() throws {
        for policy in [NSMergePolicy.error, .mergeByPropertyObjectTrump, .mergeByPropertyStoreTrump] {
            let stack = try TestStack(model: try Self.model())
            let setup = stack.context()
            let storedID = try setup.performAndWait {
                let product = try setup.make("Product", ["code": "x", "name": "stored"])
                try setup.save()
                return product.objectID
            }
            let ours = stack.context()
            ours.mergePolicy = policy
            let result: Result<Void, any Error> = ours.performAndWait {
                Result {
                    let duplicate = try ours.make("Product", ["code": "x", "name": "new"])
                    try ours.make("Line", ["quantity": 4, "product": duplicate])
                    try ours.save()
                }
            }
            let reader = stack.context()
            let (products, lineProduct) = try reader.performAndWait {
                (
                    try reader.objects("Product").map { ($0.objectID, $0.string("name") ?? "-") },
                    try reader.objects("Line").first.map { ($0.value(forKey: "product") as? NSManagedObject)?.objectID }
                )
            }
            switch policy {
            case .error:
                guard case .failure(let failure) = result, let error = failure as? CoreDataError else {
                    Issue.record("the save should fail under .error")
                    continue
                }
                #expect(error.code == .constraintConflict)
                let conflict = try #require((error.userInfo["conflictList"] as? [NSConstraintConflict])?.first)
                #expect(conflict.constraint == ["code"] && conflict.databaseObject?.objectID == storedID)
                #expect(conflict.conflictingObjects.map { $0.string("name") } == ["new"])
                #expect(products.map(\.1) == ["stored"] && lineProduct == nil)
            default:
                if case .failure(let failure) = result { Issue.record("\(policy): \(failure)") }
                #expect(products.map(\.0) == [storedID], "\(policy): one product, the stored one")
                #expect(products.first?.1 == (policy == .mergeByPropertyObjectTrump ? "new" : "stored"), "\(policy)")
                #expect(lineProduct == storedID, "\(policy): the line points at the stored product")
            }
        }
    }
}

extension Result {
    /// The error of a failure; nil for a success.
    fileprivate var failureError: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
