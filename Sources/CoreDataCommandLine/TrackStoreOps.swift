import Dispatch
import Foundation
import OpenCoreData

/// Counts the commits other processes make to a store (the coordinator's remote-change notifications).
final class RemoteCommits: @unchecked Sendable {
    private let lock = NSLock()
    private var seen = 0
    /// How many of them the tracked context has merged.
    var merged = 0
    private var observer: (any NSObjectProtocol)?

    init(coordinator: NSPersistentStoreCoordinator) {
        observer = NotificationCenter.default.addObserver(forName: .NSPersistentStoreRemoteChange, object: coordinator, queue: nil) {
            [weak self] _ in self?.lock.withLock { self?.seen += 1 }
        }
    }

    deinit { if let observer { NotificationCenter.default.removeObserver(observer) } }

    var count: Int { lock.withLock { seen } }
}

// The script operations that go to the store: batch requests, and waiting for other processes' commits.
extension ScriptRunner {
    func runStoreOp(_ name: String, _ op: [String: Any], line: Int, in target: NSManagedObjectContext) throws {
        let entityName = op["entity"] as? String ?? defaultEntity
        switch name {
        case "batch-update":
            let entity = try target.entity(named: entityName)
            let request = NSBatchUpdateRequest(entityName: entityName)
            request.predicate = try (op["where"] as? String).map { try FetchPredicate(format: $0) }
            var values: [String: Any] = [:]
            for (key, value) in try valuesField(op, line) {
                guard let attribute = entity.attributesByName[key] else {
                    throw fail(line, "entity '\(entityName)' has no attribute '\(key)'")
                }
                do {
                    values[key] = try JSONValues.attributeValue(value, for: attribute) ?? NSNull()
                } catch let failure as ToolFailure {
                    throw fail(line, "key '\(key)' \(failure.message)")
                }
            }
            request.propertiesToUpdate = values
            request.resultType = .updatedObjectIDsResultType
            let ids = (try target.execute(request) as? NSBatchUpdateResult)?.result as? [NSManagedObjectID] ?? []
            NSManagedObjectContext.mergeChanges(fromRemoteContextSave: [NSUpdatedObjectsKey: ids], into: [target])
        case "batch-delete":
            let fetch = NSFetchRequest<NSManagedObject>(entityName: entityName)
            _ = try target.entity(named: entityName)
            fetch.predicate = try (op["where"] as? String).map { try FetchPredicate(format: $0) }
            let request = NSBatchDeleteRequest(fetchRequest: fetch)
            request.resultType = .resultTypeObjectIDs
            let ids = (try target.execute(request) as? NSBatchDeleteResult)?.result as? [NSManagedObjectID] ?? []
            NSManagedObjectContext.mergeChanges(fromRemoteContextSave: [NSDeletedObjectsKey: ids], into: [target])
        default:
            try waitRemote(op, line: line, in: target)
        }
    }

    /// Waits until `count` commits by other processes have been merged into the context (each merge brings the
    /// context and its controller up to the store), or fails after `timeout` seconds (default 10).
    private func waitRemote(_ op: [String: Any], line: Int, in target: NSManagedObjectContext) throws {
        func number(_ value: Any?) -> Double? {
            switch value {
            case let n as Int: return Double(n)
            case let n as Int64: return Double(n)
            case let n as Double: return n
            case let n as JSONNumber: return Double(n.text)
            default: return nil
            }
        }
        guard let remote, let count = number(op["count"]), count >= 1, count == count.rounded() else {
            throw fail(line, "\"wait-remote\" needs \"count\", a positive number of commits")
        }
        let wanted = Int(count)
        let timeout = number(op["timeout"]) ?? 10
        let deadline = Date().addingTimeInterval(timeout)
        while remote.merged < wanted {
            let seen = remote.count
            if seen > remote.merged {
                target.mergeChangesFromStore()
                remote.merged = seen
                continue
            }
            guard Date() < deadline else {
                throw fail(line, "waited \(timeout) s for \(wanted) commits by other processes; saw \(remote.merged)")
            }
            usleep(2_000)
        }
    }
}
