import Foundation
import OpenCoreData
import Testing
import _TestSupport

/// A subclass with Core Data's hooks overridden, as Core Data apps write them: its own validation on top of the
/// model's, cleanup before deletion, and a custom accessor through primitive values.
final class Ledger: NSManagedObject {
    /// What the hooks saw, in order (the test reads it).
    nonisolated(unsafe) static var log: [String] = []

    override func validateForInsert() throws {
        try super.validateForInsert()
        try checkBalance()
    }

    override func validateForUpdate() throws {
        try super.validateForUpdate()
        try checkBalance()
    }

    override func validateForDelete() throws {
        try super.validateForDelete()
        if (value(forKey: "name") as? String) == "locked" { throw LedgerError.locked }
    }

    override func prepareForDeletion() {
        let entries = (value(forKey: "entries") as? Set<NSManagedObject>)?.count ?? -1
        Self.log.append("prepare \(value(forKey: "name") as? String ?? "?") with \(entries) entries")
    }

    override func willTurnIntoFault() { Self.log.append("will fault \(primitiveValue(forKey: "balance") as? Int64 ?? -1)") }
    override func didTurnIntoFault() { Self.log.append("did fault \(primitiveValue(forKey: "balance") as? Int64 ?? -1)") }

    /// A custom accessor, written the way Core Data's documentation shows.
    var balance: Int64 {
        get {
            willAccessValue(forKey: "balance")
            defer { didAccessValue(forKey: "balance") }
            return primitiveValue(forKey: "balance") as? Int64 ?? 0
        }
        set {
            willChangeValue(forKey: "balance")
            setPrimitiveValue(newValue, forKey: "balance")
            didChangeValue(forKey: "balance")
        }
    }

    private func checkBalance() throws {
        if balance < 0 { throw LedgerError.negative(value(forKey: "name") as? String ?? "?") }
    }

    enum LedgerError: Error, CustomStringConvertible {
        case negative(String)
        case locked
        var description: String {
            switch self {
            case .negative(let name): "\(name) is overdrawn"
            case .locked: "a locked ledger cannot be deleted"
            }
        }
    }
}

@Suite(.serialized) struct LifecycleHookTests {
    /// A new ledger named `name` (the subclass's own initializer makes it a `Ledger`).
    static func ledger(_ name: String?, in context: NSManagedObjectContext) -> Ledger {
        let ledger = Ledger(context: context)
        ledger.setValue(name, forKey: "name")
        return ledger
    }

    static func model() throws -> NSManagedObjectModel {
        try NSManagedObjectModel {
            Entity("Ledger", managedObjectClass: Ledger.self) {
                Attribute("name", .string, optional: false)
                Attribute("balance", .integer64, default: Int64(0))
                Relationship("entries", to: "Entry", toMany: true, inverse: "ledger", deleteRule: .cascadeDeleteRule)
            }
            Entity("Entry") {
                Attribute("amount", .integer64, default: Int64(0))
                Relationship("ledger", to: "Ledger", inverse: "entries")
            }
        }
    }

    @Test func aSubclassAddsItsOwnValidationToTheModels() throws {
        let stack = try TestStack(model: try Self.model(), inMemory: true)
        let context = stack.context()
        let ledger = Self.ledger("home", in: context)
        ledger.balance = -5
        // Its own rule and the model's (a second ledger without its required name) are both reported.
        _ = Self.ledger(nil, in: context)
        let both = #expect(throws: CoreDataError.self) { try context.save() }
        #expect(both?.code == .validationMultipleErrors && both?.underlying.count == 2, "\(both.map { "\($0)" } ?? "")")
        #expect(both?.underlying.contains { $0.code == .managedObjectValidation && $0.message.contains("home is overdrawn") } == true)
        #expect(both?.underlying.contains { $0.code == .validationMissingMandatoryProperty } == true)
        context.rollback()
        let saved = Self.ledger("work", in: context)
        saved.balance = 10
        try context.save()
        // The custom accessor's value was saved, and an update is checked by the subclass too.
        #expect(try stack.context().objects("Ledger").first?.value(forKey: "balance") as? Int64 == 10)
        saved.balance = -1
        let update = #expect(throws: CoreDataError.self) { try context.save() }
        #expect(update?.message.contains("work is overdrawn") == true, "\(update.map { "\($0)" } ?? "")")
        saved.balance = 3
        try context.save()
    }

    @Test func deletionIsPreparedWithItsRelationshipsAndCanBeRefused() throws {
        Ledger.log = []
        let stack = try TestStack(model: try Self.model(), inMemory: true)
        let context = stack.context()
        let ledger = Self.ledger("home", in: context)
        for amount in [1, 2] { try context.make("Entry", ["amount": amount, "ledger": ledger]) }
        let locked = Self.ledger("locked", in: context)
        try context.save()
        context.delete(ledger)
        context.delete(ledger)  // once only
        #expect(Ledger.log == ["prepare home with 2 entries"])
        try context.save()
        #expect(try stack.context().objects("Entry").isEmpty, "the entries went with it (cascade)")
        context.delete(locked)
        let refused = #expect(throws: CoreDataError.self) { try context.save() }
        #expect(refused?.message.contains("a locked ledger cannot be deleted") == true)
    }

    @Test func aRefreshThatDiscardsChangesIsAFault() throws {
        Ledger.log = []
        let stack = try TestStack(model: try Self.model(), inMemory: true)
        let context = stack.context()
        let ledger = Self.ledger("home", in: context)
        ledger.balance = 7
        try context.save()
        ledger.balance = 9
        context.refresh(ledger, mergeChanges: false)
        #expect(Ledger.log == ["will fault 9", "did fault 7"])
        #expect(ledger.balance == 7)
    }

    @Test func relationshipIDsWithoutTheirObjects() throws {
        let stack = try TestStack(model: try Self.model())
        let setup = stack.context()
        let ledger = Self.ledger("home", in: setup)
        let entries = try [1, 2, 3].map { try setup.make("Entry", ["amount": $0, "ledger": ledger]) }
        try setup.save()
        let context = stack.context()
        let fetched = try #require(try context.objects("Ledger").first)
        let ids = fetched.objectIDs(forRelationshipNamed: "entries")
        #expect(Set(ids) == Set(entries.map(\.objectID)))
        #expect(fetched.hasFault(forRelationshipNamed: "entries") == false)
        let entry = try #require(try context.objects("Entry", "amount == 2").first)
        #expect(entry.objectIDs(forRelationshipNamed: "ledger") == [ledger.objectID])
        #expect(entry.objectIDs(forRelationshipNamed: "amount").isEmpty)
        // Unsaved changes count.
        let extra = try context.make("Entry", ["amount": 4])
        fetched.mutableSetValue(forKey: "entries").add(extra)
        #expect(fetched.objectIDs(forRelationshipNamed: "entries").count == 4)
    }
}
