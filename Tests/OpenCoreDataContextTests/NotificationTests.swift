import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// Collects notifications of one name from one object, thread-safely.
final class NotificationRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var notes: [Notification] = []
    private var token: (any NSObjectProtocol)?

    init(_ name: Notification.Name, object: AnyObject?) {
        token = NotificationCenter.default.addObserver(forName: name, object: object, queue: nil) { [weak self] note in
            guard let self else { return }
            self.lock.lock()
            self.notes.append(note)
            self.lock.unlock()
        }
    }

    var all: [Notification] {
        lock.lock()
        defer { lock.unlock() }
        return notes
    }

    func set(_ key: String, at index: Int) -> Set<NSManagedObject> {
        all[index].userInfo?[key] as? Set<NSManagedObject> ?? []
    }

    deinit { if let token { NotificationCenter.default.removeObserver(token) } }
}

@Suite struct NotificationTests {
    @Test func objectsDidChangeReportsChangesMadeNotOnlySaved() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let recorder = NotificationRecorder(.NSManagedObjectContextObjectsDidChange, object: context)
        let d = try context.make("Department", ["name": "A"])
        context.processPendingChanges()
        #expect(recorder.all.count == 1)
        #expect(recorder.set(NSInsertedObjectsKey, at: 0) == [d])
        #expect(recorder.set(NSUpdatedObjectsKey, at: 0).isEmpty)

        try context.save()
        d.setValue("B", forKey: "name")
        var keysSeen: [String: Any] = [:]
        let observation = context.addChangeObserver { change in
            keysSeen = change.updated.first?.object.changedValuesForCurrentEvent() ?? [:]
        }
        context.processPendingChanges()
        #expect(recorder.all.count == 2)
        #expect(recorder.set(NSUpdatedObjectsKey, at: 1) == [d])
        #expect(keysSeen["name"] as? String == "B")
        observation.cancel()

        context.delete(d)
        context.processPendingChanges()
        #expect(recorder.set(NSDeletedObjectsKey, at: 2) == [d])
    }

    @Test func settingAValueAndSettingItBackReportsNothing() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let d = try context.make("Department", ["name": "A"])
        try context.save()
        let recorder = NotificationRecorder(.NSManagedObjectContextObjectsDidChange, object: context)
        d.setValue("B", forKey: "name")
        d.setValue("A", forKey: "name")
        context.processPendingChanges()
        #expect(recorder.all.isEmpty)
        #expect(!context.hasChanges)
    }

    @Test func changedKeysAreReportedPerObject() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let e = try context.make("Employee", ["name": "E", "salary": 1.0])
        let d = try context.make("Department", ["name": "D"])
        try context.save()
        var updates: [String: Set<String>] = [:]
        let token = context.addChangeObserver { change in
            for (object, keys) in change.updated { updates[object.string("name") ?? "?"] = keys }
        }
        e.setValue(2.0, forKey: "salary")
        e.setValue(d, forKey: "department")
        context.processPendingChanges()
        #expect(updates["E"] == ["salary", "department"])
        #expect(updates["D"] == ["employees"], "the inverse side is reported too")
        token.cancel()
    }

    @Test func willSaveAndDidSaveCarryObjectsAndIDs() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let context = stack.context()
        let old = try context.make("Department", ["name": "Old"])
        let gone = try context.make("Department", ["name": "Gone"])
        try context.save()
        let will = NotificationRecorder(.NSManagedObjectContextWillSave, object: context)
        let did = NotificationRecorder(.NSManagedObjectContextDidSave, object: context)
        let new = try context.make("Department", ["name": "New"])
        old.setValue("Renamed", forKey: "name")
        context.delete(gone)
        let goneID = gone.objectID
        try context.save()
        #expect(will.all.count == 1)
        #expect(did.all.count == 1)
        #expect(did.set(NSInsertedObjectsKey, at: 0) == [new])
        #expect(did.set(NSUpdatedObjectsKey, at: 0) == [old])
        #expect(did.set(NSDeletedObjectsKey, at: 0) == [gone])
        let info = did.all[0].userInfo ?? [:]
        #expect(info[NSInsertedObjectIDsKey] as? Set<NSManagedObjectID> == [new.objectID])
        #expect((info[NSInsertedObjectIDsKey] as? Set<NSManagedObjectID>)?.first?.isTemporaryID == false)
        #expect(info[NSDeletedObjectIDsKey] as? Set<NSManagedObjectID> == [goneID])
        #expect(info[NSUpdatedObjectIDsKey] as? Set<NSManagedObjectID> == [old.objectID])
    }

    @Test func mergeBringsAnotherContextsSaveAndPostsObjectsDidChange() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let main = stack.context()
        let seeded = try main.make("Department", ["name": "Seed"])
        let doomed = try main.make("Department", ["name": "Doomed"])
        try main.save()
        _ = try main.objects("Department")  // registered in main

        let background = stack.context()
        let didSave = NotificationRecorder(.NSManagedObjectContextDidSave, object: background)
        let changes = NotificationRecorder(.NSManagedObjectContextObjectsDidChange, object: main)
        try background.make("Department", ["name": "Fresh"])
        let bSeed = try #require(try background.objects("Department", "name == 'Seed'").first)
        bSeed.setValue("Seed v2", forKey: "name")
        background.delete(try #require(try background.objects("Department", "name == 'Doomed'").first))
        try background.save()

        let note = try #require(didSave.all.first)
        main.mergeChanges(fromContextDidSave: note)
        #expect(seeded.string("name") == "Seed v2")
        #expect(doomed.managedObjectContext == nil || doomed.isDeleted == false)
        let change = try #require(changes.all.last)
        #expect((change.userInfo?[NSInsertedObjectsKey] as? Set<NSManagedObject>)?.map { $0.string("name") } == ["Fresh"])
        #expect(change.userInfo?[NSUpdatedObjectsKey] as? Set<NSManagedObject> == [seeded])
        #expect(change.userInfo?[NSDeletedObjectsKey] as? Set<NSManagedObject> == [doomed])
        #expect(Set(names(try main.objects("Department"))) == ["Seed v2", "Fresh"])
        #expect(!main.hasChanges, "merged changes are not pending changes")
    }

    @Test func mergeKeepsLocalEditsOnTop() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let main = stack.context()
        let e = try main.make("Employee", ["name": "E", "salary": 1.0, "age": 30])
        try main.save()
        let other = stack.context()
        let did = NotificationRecorder(.NSManagedObjectContextDidSave, object: other)
        let oe = try #require(try other.objects("Employee").first)
        oe.setValue(99, forKey: "age")
        try other.save()
        e.setValue(5.0, forKey: "salary")
        main.mergeChanges(fromContextDidSave: try #require(did.all.first))
        #expect(e.value(forKey: "age") as? Int == 99)
        #expect(e.value(forKey: "salary") as? Double == 5.0)
        try main.save()
        let check = try #require(try stack.context().objects("Employee").first)
        #expect(check.value(forKey: "age") as? Int == 99)
        #expect(check.value(forKey: "salary") as? Double == 5.0)
    }

    @Test func mergeUpdatesToManyRelationshipsOfRegisteredObjects() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let main = stack.context()
        let d = try main.make("Department", ["name": "D"])
        try main.save()
        #expect((d.value(forKey: "employees") as? Set<NSManagedObject>)?.isEmpty == true)
        let other = stack.context()
        let did = NotificationRecorder(.NSManagedObjectContextDidSave, object: other)
        let od = try #require(try other.objects("Department").first)
        try other.make("Employee", ["name": "Joined", "department": od])
        try other.save()
        var reported: Set<String> = []
        let token = main.addChangeObserver { change in
            for (object, keys) in change.updated where object === d { reported = keys }
        }
        main.mergeChanges(fromContextDidSave: try #require(did.all.first))
        #expect(names(Array((d.value(forKey: "employees") as? Set<NSManagedObject>) ?? [])) == ["Joined"])
        #expect(reported.contains("employees"))
        token.cancel()
    }

    /// Unsaved membership edits here survive a merge that changed the same to-many there: both sides' edits remain.
    @Test func mergeRebasesUnsavedToManyEdits() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let main = stack.context()
        let d = try main.make("Department", ["name": "D"])
        try main.make("Employee", ["name": "a", "department": d])
        let b = try main.make("Employee", ["name": "b", "department": d])
        try main.save()
        var members = try #require(d.value(forKey: "employees") as? Set<NSManagedObject>)
        members.remove(b)
        d.setValue(members, forKey: "employees")
        try main.make("Employee", ["name": "c", "department": d])
        let other = stack.context()
        let did = NotificationRecorder(.NSManagedObjectContextDidSave, object: other)
        let theirs = try #require(try other.objects("Department").first)
        try other.make("Employee", ["name": "x", "department": theirs])
        try other.save()
        main.mergeChanges(fromContextDidSave: try #require(did.all.first))
        #expect(Set(names(Array((d.value(forKey: "employees") as? Set<NSManagedObject>) ?? []))) == ["a", "c", "x"])
        try main.save()
        let fresh = stack.context()
        let department = try #require(try fresh.objects("Department").first)
        #expect(Set(names(Array((department.value(forKey: "employees") as? Set<NSManagedObject>) ?? []))) == ["a", "c", "x"])
        #expect(try fresh.objects("Employee", "name == 'b'").first?.value(forKey: "department") == nil)
    }

    /// Another context links an object to one deleted here (not yet saved): the deleted object's rule reaches the
    /// newcomer, so the save stores no reference to a missing row.
    @Test func mergeAppliesDeleteRulesToObjectsLinkedThere() throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let main = stack.context()
        let d = try main.make("Department", ["name": "D"])
        let mentor = try main.make("Employee", ["name": "mentor"])
        try main.make("Employee", ["name": "pupil"])
        try main.save()
        main.delete(d)  // employees cascade
        main.delete(mentor)  // mentees nullify
        main.processPendingChanges()
        let other = stack.context()
        let did = NotificationRecorder(.NSManagedObjectContextDidSave, object: other)
        let theirs = try #require(try other.objects("Department").first)
        try other.make("Employee", ["name": "hired", "department": theirs])
        let pupil = try #require(try other.objects("Employee", "name == 'pupil'").first)
        let theirMentor = try #require(try other.objects("Employee", "name == 'mentor'").first)
        pupil.setValue(theirMentor, forKey: "mentor")
        try other.save()
        main.mergeChanges(fromContextDidSave: try #require(did.all.first))
        main.processPendingChanges()
        try main.save()
        let fresh = stack.context()
        #expect(try fresh.objects("Department").isEmpty)
        #expect(names(try fresh.objects("Employee")) == ["pupil"], "the hire into the deleted department cascades")
        let survivor = try #require(try fresh.objects("Employee").first)
        #expect(survivor.value(forKey: "mentor") == nil, "the link to the deleted mentor is nullified")
    }

    /// Seed 001: listen for did-save from any context, merge on the main context.
    @Test func listenForDidSaveAndMergeOnTheViewContext() async throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let viewContext = stack.context()  // a private-queue stand-in for the main queue in tests
        let merged = NotificationRecorder(.NSManagedObjectContextObjectsDidChange, object: viewContext)
        let token = NotificationCenter.default.addObserver(forName: .NSManagedObjectContextDidSave, object: nil, queue: nil) { note in
            guard let saver = note.object as? NSManagedObjectContext, saver !== viewContext else { return }
            viewContext.performAndWait { viewContext.mergeChanges(fromContextDidSave: note) }
        }
        defer { NotificationCenter.default.removeObserver(token) }
        try await stack.container.performBackgroundTask { context in
            try context.make("Department", ["name": "From background"])
            try context.save()
        }
        let inserted = merged.all.compactMap { $0.userInfo?[NSInsertedObjectsKey] as? Set<NSManagedObject> }.flatMap { $0 }
        #expect(inserted.map { $0.string("name") } == ["From background"])
        #expect(inserted.first?.managedObjectContext === viewContext)
    }

    @Test func automaticMergingFromTheSameCoordinator() async throws {
        let stack = try TestStack(model: try makeCompanyModel())
        let view = stack.context()
        view.automaticallyMergesChangesFromParent = true
        let d = try view.make("Department", ["name": "v1"])
        try view.save()
        try await stack.container.performBackgroundTask { context in
            let bd = try context.objects("Department").first
            bd?.setValue("v2", forKey: "name")
            try context.save()
        }
        // The merge is scheduled on the view context's queue; wait for it.
        await view.perform {}
        #expect(d.string("name") == "v2")
    }
}

/// Contexts that merge automatically hear every save: two of them saving at the same moment, on their own queues,
/// must not wait for each other (each posts its save while holding its own lock; hearing it must not take the other's).
@Suite struct ConcurrentAutoMergeTests {
    @Test func autoMergingContextsSavingAtOnceDoNotDeadlock() throws {
        let model = try NSManagedObjectModel { Entity("Item") { Attribute("n", .integer64, default: 0) } }
        let stacks = try (0..<3).map { _ in try TestStack(model: model) }
        let contexts = stacks.map { stack in
            let context = stack.context()
            context.automaticallyMergesChangesFromParent = true
            return context
        }
        let group = DispatchGroup()
        for context in contexts {
            DispatchQueue.global().async(group: group) {
                context.performAndWait {
                    for n in 0..<2000 {
                        do {
                            try context.make("Item", ["n": n])
                            try context.save()
                        } catch {
                            Issue.record("save \(n) failed: \(error)")
                            return
                        }
                    }
                }
            }
        }
        // A deadlock leaves both saving forever: give up after a minute (the saves take well under a second).
        #expect(group.wait(timeout: .now() + 60) == .success, "two auto-merging contexts saving at once deadlocked")
    }
}
